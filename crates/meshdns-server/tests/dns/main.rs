//! One integration-test binary: the real server on loopback, real records files, real clients.

mod behaviour;
mod protocol;
mod reload;
mod seed;
mod support;
