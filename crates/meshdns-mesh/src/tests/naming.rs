//! The mesh planner: naming.

use super::*;

#[test]
fn peer_names_follow_the_reference() {
    for (mesh, src, node, want) in [
        ("mesh1", "cluster-a", "node-1", "mesh1--cluster-a--node-1"),
        ("m", "c", "n", "m--c--n"),
        ("mesh0", "cluster0", "node0", "mesh0--cluster0--node0"),
        ("Mesh", "ClusterA", "NodeOne", "mesh--clustera--nodeone"),
        (
            "my_mesh",
            "my_cluster",
            "my_node",
            "my-mesh--my-cluster--my-node",
        ),
        // Runs of replaced characters are kept, not collapsed.
        ("mesh__name", "cluster", "node", "mesh--name--cluster--node"),
        ("", "cluster", "node", "cluster--node"),
        ("mesh", "cluster", "", "mesh--cluster"),
        ("", "", "", ""),
        ("mesh", "c", "node.example.com", "mesh--c--node.example.com"),
    ] {
        let got = peer_name(mesh, src, node);
        assert_eq!(got, want, "{mesh:?} {src:?} {node:?}");
        assert!(!got.starts_with(['-', '.']) && !got.ends_with(['-', '.']));
    }
    assert_ne!(
        peer_name("mesh", "clusterA", "node1"),
        peer_name("mesh", "clusterB", "node1")
    );
    assert_eq!(peer_name("a", "b", "c"), peer_name("a", "b", "c"));
}

#[test]
fn long_peer_names_are_hash_truncated() {
    let (m, c, n) = ("a".repeat(100), "B".repeat(100), "c".repeat(100));
    let got = peer_name(&m, &c, &n);
    assert_eq!(got.len(), 253);
    let (head, hash) = got.rsplit_once('-').unwrap();
    assert_eq!(hash.len(), 16);
    assert!(
        hash.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    // The head is the first 236 characters of the sanitised name.
    let sanitised = format!("{m}--{}--{n}", c.to_lowercase());
    assert_eq!(head, &sanitised[..236]);
    // The hash is over the unsanitised raw name: case changes the hash.
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{m}--{c}--{n}").as_bytes());
    assert_eq!(hash, data_encoding::HEXLOWER.encode(&digest[..8]));
    // A cut that lands on a dash is trimmed before the hash.
    let dashy = peer_name(&"x".repeat(235), "y", "z".repeat(40).as_str());
    assert!(dashy.len() <= 253 && !dashy.contains("--y") && !dashy[..235].ends_with('-'));
}

#[test]
fn labels_name_mesh_and_source() {
    let l = peer_labels("my-mesh", "my-cluster");
    assert_eq!(l.len(), 2);
    assert_eq!(l[LABEL_MESH], "my-mesh");
    assert_eq!(l[LABEL_SOURCE_CLUSTER], "my-cluster");
}
