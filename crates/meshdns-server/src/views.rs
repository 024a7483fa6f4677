//! Views (split horizon): the catalog a query is answered from, chosen by the client's
//! address.
//!
//! Each view has ranges and a catalog of its own (the data every view sees and what is given
//! for that view, published by the watcher). The first view, in the order configured, whose
//! ranges hold the client's address answers; a client in no view is answered from the
//! catalog of the data every view sees. Without views the servers never look here (one field
//! checked per query).

use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use meshdns_xfr::Primary;
use meshdns_zone::cidr::ip_bits;
use meshdns_zone::{Catalog, Cidr};

use crate::SharedCatalog;
use crate::metrics::{header, label_value};

/// One view: its name, its catalog, the serials and journals of the zones it changes, and
/// how many queries it answered.
#[derive(Debug)]
struct View {
    name: String,
    catalog: SharedCatalog,
    primary: Arc<Primary>,
    queries: AtomicU64,
}

/// The views configured (`--view NAME=CIDR[,CIDR…]`), in order.
#[derive(Debug)]
pub struct Views {
    views: Vec<View>,
    /// Every view's ranges in the order given, as masks over the address's 128 bits (IPv4 in
    /// the top 32), with the view's index: one compare per range per query.
    ranges: Vec<Range>,
    /// Queries from clients in no view.
    unmatched: AtomicU64,
}

/// One range of one view, ready to compare.
#[derive(Debug, Clone, Copy)]
struct Range {
    v4: bool,
    net: u128,
    mask: u128,
    view: usize,
}

impl Views {
    /// Views of these names and ranges, in this order, each with the primary `primary` makes
    /// for it (by name); each catalog empty until published.
    pub fn new(defs: Vec<(String, Vec<Cidr>)>, primary: impl Fn(&str) -> Primary) -> Views {
        let ranges = defs
            .iter()
            .enumerate()
            .flat_map(|(view, (_, ranges))| {
                ranges.iter().map(move |r| {
                    let (v4, net, mask) = r.masked();
                    Range {
                        v4,
                        net,
                        mask,
                        view,
                    }
                })
            })
            .collect();
        Views {
            ranges,
            views: defs
                .into_iter()
                .map(|(name, _)| View {
                    primary: Arc::new(primary(&name)),
                    name,
                    catalog: Arc::new(ArcSwap::from_pointee(Catalog::empty())),
                    queries: AtomicU64::new(0),
                })
                .collect(),
            unmatched: AtomicU64::new(0),
        }
    }

    /// Each view's name, the place its catalog is published to and its primary.
    pub fn outs(&self) -> Vec<(String, SharedCatalog, Arc<Primary>)> {
        self.views
            .iter()
            .map(|v| (v.name.clone(), v.catalog.clone(), v.primary.clone()))
            .collect()
    }

    /// The place of the view `client` is in (the first whose ranges hold it), in the order
    /// configured.
    pub fn index(&self, client: IpAddr) -> Option<usize> {
        let (v4, addr) = ip_bits(client);
        self.ranges
            .iter()
            .find(|r| r.v4 == v4 && addr & r.mask == r.net)
            .map(|r| r.view)
    }

    /// The name, catalog and primary of the view at `i` ([`Views::index`]).
    pub fn at(&self, i: usize) -> (&str, &SharedCatalog, &Arc<Primary>) {
        let v = &self.views[i];
        (&v.name, &v.catalog, &v.primary)
    }

    fn find(&self, client: IpAddr) -> Option<&View> {
        self.index(client).map(|i| &self.views[i])
    }

    /// The catalog that answers `client`: its view's; `default` (the data every view sees)
    /// for a client in no view. `count` counts the query for its view (false for a query
    /// counted already, answered again after a lookup).
    pub fn pick<'a>(
        &'a self,
        client: IpAddr,
        default: &'a SharedCatalog,
        count: bool,
    ) -> &'a SharedCatalog {
        let view = self.find(client);
        if count {
            view.map_or(&self.unmatched, |v| &v.queries)
                .fetch_add(1, Ordering::Relaxed);
        }
        view.map_or(default, |v| &v.catalog)
    }

    /// The catalog that answers `client` when `views` are configured (see [`Views::pick`]);
    /// `default` without views.
    #[inline]
    pub fn pick_in<'a>(
        views: Option<&'a Views>,
        client: IpAddr,
        default: &'a SharedCatalog,
        count: bool,
    ) -> &'a SharedCatalog {
        match views {
            None => default,
            Some(views) => views.pick(client, default, count),
        }
    }

    /// The views' query counters in the Prometheus text format.
    pub fn render(&self, out: &mut String) {
        header(
            out,
            "meshdns_view_queries_total",
            "DNS queries by the view that answered them (--view); view=\"\" for clients in no view.",
            "counter",
        );
        for v in &self.views {
            let _ = writeln!(
                out,
                "meshdns_view_queries_total{{view=\"{}\"}} {}",
                label_value(&v.name),
                v.queries.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "meshdns_view_queries_total{{view=\"\"}} {}",
            self.unmatched.load(Ordering::Relaxed)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn the_first_view_holding_the_address_answers_and_is_counted() {
        let views = Views::new(
            vec![
                (
                    "inside".into(),
                    vec![cidr("127.0.0.2/32"), cidr("10.0.0.0/8")],
                ),
                ("wide".into(), vec![cidr("127.0.0.0/8")]),
                ("v6".into(), vec![cidr("2001:db8::/32")]),
            ],
            |_| Primary::new(None, 0, false),
        );
        let default: SharedCatalog = Arc::new(ArcSwap::from_pointee(Catalog::empty()));
        for (client, want) in [
            ("127.0.0.2", Some("inside")),
            ("10.1.2.3", Some("inside")),
            ("127.0.0.3", Some("wide")),
            ("::ffff:127.0.0.2", Some("inside")),
            ("2001:db8::1", Some("v6")),
            ("192.0.2.1", None),
            ("::1", None),
        ] {
            let ip: IpAddr = client.parse().unwrap();
            assert_eq!(views.index(ip).map(|i| views.at(i).0), want, "{client}");
            let picked = views.pick(ip, &default, true);
            assert_eq!(Arc::ptr_eq(picked, &default), want.is_none(), "{client}");
        }
        let mut out = String::new();
        views.render(&mut out);
        for line in [
            "meshdns_view_queries_total{view=\"inside\"} 3",
            "meshdns_view_queries_total{view=\"wide\"} 1",
            "meshdns_view_queries_total{view=\"v6\"} 1",
            "meshdns_view_queries_total{view=\"\"} 2",
        ] {
            assert!(out.contains(line), "{line}\n{out}");
        }
    }
}
