//! What `meshdns serve` reads from and writes to a cluster. None of it is a controller: the
//! readers hand objects to the records watcher as feeds, and the status writer reports what
//! the served snapshot made of them.

pub mod configmap;
pub mod records;
pub mod status;
