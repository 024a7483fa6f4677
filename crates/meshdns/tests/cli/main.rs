//! The real `meshdns` binary, as users meet it: started as a process, queried with `dig`,
//! scraped over HTTP, stopped with a signal; and `meshdns check` on files.
//!
//! `dig` must be installed (`apt-get install dnsutils`; `.ci/run` does it). A missing `dig`
//! fails these tests rather than skipping them.

#![allow(missing_docs)] // test helpers are not public API

mod absent;
mod acme;
mod catalog;
mod check;
mod configmap;
mod controller;
mod deploy;
mod dht;
mod dig;
mod docs;
mod doh;
mod doh_iroh;
mod dropin;
mod fleet;
mod hostile;
mod hostile_files;
mod hostile_http;
mod kubernetes;
mod malformed;
mod manifests;
mod nsid;
mod overload;
mod pkarr;
mod process;
mod refusals;
mod render;
mod render_mesh;
mod reverse;
mod rrl;
mod secondaries;
mod tls;
mod types;
mod update;
mod views;
mod walk;
mod xfr;
mod xfr_tsig;

pub use process::*;
