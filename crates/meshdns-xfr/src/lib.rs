//! Zone transfers for meshdns: meshdns as a primary that NSD, Knot, BIND or another meshdns
//! can follow.
//!
//! - [`serial`]: when a zone's serial changes (exactly when its content does), RFC 1982
//!   arithmetic, and the book that keeps serials across restarts;
//! - [`content`]: the records a transfer sends (the zone's, and the keys published under a
//!   pkarr origin, with the answers' precedence) and differences between versions;
//! - [`journal`]: the bounded IXFR journal of one zone, condensed on the way out;
//! - [`primary`]: every zone's current version, serial and journal, updated by the loader;
//! - [`message`]: reading transfer and NOTIFY messages, writing multi-record replies, random
//!   message IDs;
//! - [`tsig`]: RFC 8945 signatures and BIND-format key files;
//! - [`respond`]: AXFR and IXFR replies with access control, and signed answers to signed
//!   queries;
//! - [`notify`]: the NOTIFY message (RFC 1996) and its acknowledgement;
//! - [`secondary`]: checking the reply to a secondary's SOA query, reading transfer replies,
//!   applying differences;
//! - [`throttle`]: warnings about peers' requests, one line per cause per interval;
//! - [`update`]: dynamic UPDATE (RFC 2136): its sections read, prerequisites checked, updates
//!   applied to a zone's records, purely.
//!
//! No sockets here: the server crate sends and receives.

pub mod content;
pub mod journal;
pub mod message;
pub mod notify;
pub mod primary;
pub mod probe;
pub mod respond;
pub mod secondary;
pub mod serial;
pub mod throttle;
pub mod tsig;
pub mod update;

pub use primary::{Ixfr, Primary};
pub use respond::{
    Kind, Outcome, Policy, Primaries, Reply, respond, respond_collected, respond_from, sign_answer,
    sign_answer_with,
};
pub use tsig::{Key, parse_key_file};
