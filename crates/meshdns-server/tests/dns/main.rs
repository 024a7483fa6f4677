//! One integration-test binary: the real server on loopback, real records files, real clients.

#![allow(missing_docs)] // test helpers are not public API

mod behaviour;
mod http_panic;
mod iroh;
mod notify;
mod protocol;
mod reload;
mod seed;
mod support;
