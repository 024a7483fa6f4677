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
use meshdns_zone::{Catalog, Cidr};

use crate::SharedCatalog;
use crate::metrics::{header, label_value};

/// One view: its name, its ranges, its catalog and how many queries it answered.
#[derive(Debug)]
struct View {
    name: String,
    ranges: Vec<Cidr>,
    catalog: SharedCatalog,
    queries: AtomicU64,
}

/// The views configured (`--view NAME=CIDR[,CIDR…]`), in order.
#[derive(Debug)]
pub struct Views {
    views: Vec<View>,
    /// Queries from clients in no view.
    unmatched: AtomicU64,
}

impl Views {
    /// Views of these names and ranges, in this order; each catalog empty until published.
    pub fn new(defs: Vec<(String, Vec<Cidr>)>) -> Views {
        Views {
            views: defs
                .into_iter()
                .map(|(name, ranges)| View {
                    name,
                    ranges,
                    catalog: Arc::new(ArcSwap::from_pointee(Catalog::empty())),
                    queries: AtomicU64::new(0),
                })
                .collect(),
            unmatched: AtomicU64::new(0),
        }
    }

    /// Each view's name and the place its catalog is published to.
    pub fn catalogs(&self) -> Vec<(String, SharedCatalog)> {
        self.views
            .iter()
            .map(|v| (v.name.clone(), v.catalog.clone()))
            .collect()
    }

    /// The view `client` is in (the first whose ranges hold it), by name.
    pub fn classify(&self, client: IpAddr) -> Option<&str> {
        self.find(client).map(|v| v.name.as_str())
    }

    fn find(&self, client: IpAddr) -> Option<&View> {
        // A dual-stack socket reports IPv4 clients as IPv4-mapped IPv6 addresses.
        let client = client.to_canonical();
        self.views
            .iter()
            .find(|v| v.ranges.iter().any(|r| r.contains(client)))
    }

    /// The catalog that answers `client`: its view's; `default` (the data every view sees)
    /// for a client in no view.
    pub fn catalog<'a>(&'a self, client: IpAddr, default: &'a SharedCatalog) -> &'a SharedCatalog {
        self.find(client).map_or(default, |v| &v.catalog)
    }

    /// [`Views::catalog`], counting the query for its view.
    pub fn pick<'a>(&'a self, client: IpAddr, default: &'a SharedCatalog) -> &'a SharedCatalog {
        match self.find(client) {
            Some(view) => {
                view.queries.fetch_add(1, Ordering::Relaxed);
                &view.catalog
            }
            None => {
                self.unmatched.fetch_add(1, Ordering::Relaxed);
                default
            }
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
        let views = Views::new(vec![
            (
                "inside".into(),
                vec![cidr("127.0.0.2/32"), cidr("10.0.0.0/8")],
            ),
            ("wide".into(), vec![cidr("127.0.0.0/8")]),
            ("v6".into(), vec![cidr("2001:db8::/32")]),
        ]);
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
            assert_eq!(views.classify(ip), want, "{client}");
            let picked = views.pick(ip, &default);
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
