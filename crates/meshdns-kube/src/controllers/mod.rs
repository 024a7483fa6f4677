//! The controllers: each a kube-rs `Controller` around one pure planner, run while this
//! replica holds its Lease (`meshdns controller iroh|mesh`).

pub mod iroh;
pub mod mesh;
