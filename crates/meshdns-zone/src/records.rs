//! A flat list of records in wire form: what a source hands the zone builder.
//!
//! A million-host zone file is 3.5 million records. As `Vec<Record>` that is an allocation per
//! owner name and per TXT string, freed again once the zone is built. [`Records`] keeps the
//! same records in three growing buffers instead: owner names (a run of records at one owner
//! stores the name once), RDATA, and one small fixed-size item per record. Writing it is
//! sequential, and [`crate::CatalogBuilder::add_records`] takes its RDATA buffer over as the
//! zone's own without copying.

use std::fmt;

use crate::name::Name;
use crate::rdata::{RData, RType};

/// One record as a source hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Absolute owner name.
    pub name: Name,
    /// Time to live in seconds.
    pub ttl: u32,
    /// The data; its type is the record's type.
    pub data: RData,
}

/// One record's place in the buffers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Item {
    pub(crate) name_at: u32,
    pub(crate) data_at: u32,
    pub(crate) ttl: u32,
    pub(crate) rtype: RType,
    pub(crate) data_len: u16,
    pub(crate) name_len: u8,
}

impl Item {
    /// The owner's bytes in the owner buffer.
    pub(crate) fn owner<'a>(&self, names: &'a [u8]) -> &'a [u8] {
        &names[self.name_at as usize..self.name_at as usize + usize::from(self.name_len)]
    }

    fn view<'a>(&self, names: &'a [u8], data: &'a [u8]) -> RecordRef<'a> {
        RecordRef {
            owner: self.owner(names),
            rtype: self.rtype,
            ttl: self.ttl,
            rdata: &data[self.data_at as usize..self.data_at as usize + usize::from(self.data_len)],
        }
    }
}

/// Records in the order added, held as wire bytes. Every owner is an absolute, lower-cased
/// wire name, and every RDATA the uncompressed form [`RData::to_wire`] writes.
#[derive(Clone, Default)]
pub struct Records {
    names: Vec<u8>,
    data: Vec<u8>,
    items: Vec<Item>,
}

/// One record of a [`Records`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Owner, lower-cased wire form.
    pub owner: &'a [u8],
    /// Type.
    pub rtype: RType,
    /// Time to live in seconds.
    pub ttl: u32,
    /// Uncompressed wire RDATA.
    pub rdata: &'a [u8],
}

impl RecordRef<'_> {
    /// The owner as a [`Name`].
    pub fn name(&self) -> Name {
        Name::from_wire(self.owner).expect("Records holds valid owner names")
    }

    /// The record, decoded.
    pub fn to_record(&self) -> Record {
        Record {
            name: self.name(),
            ttl: self.ttl,
            data: RData::from_wire(self.rtype, self.rdata)
                .expect("Records holds RDATA as RData::to_wire writes it"),
        }
    }
}

impl Records {
    /// No records.
    pub fn new() -> Records {
        Records::default()
    }

    /// Room for `records` records of about `data_bytes` RDATA in all.
    pub fn with_capacity(records: usize, data_bytes: usize) -> Records {
        Records {
            names: Vec::with_capacity(records * 8),
            data: Vec::with_capacity(data_bytes),
            items: Vec::with_capacity(records),
        }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The record at `index`.
    pub fn get(&self, index: usize) -> Option<RecordRef<'_>> {
        self.items
            .get(index)
            .map(|i| i.view(&self.names, &self.data))
    }

    /// Every record, in the order added.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = RecordRef<'_>> + '_ {
        self.items.iter().map(|i| i.view(&self.names, &self.data))
    }

    /// Every record, decoded.
    pub fn to_vec(&self) -> Vec<Record> {
        self.iter().map(|r| r.to_record()).collect()
    }

    /// Adds one record.
    pub fn push(&mut self, record: Record) {
        let data_at = self.data.len();
        record.data.to_wire(&mut self.data);
        self.add_item(record.name.wire(), record.data.rtype(), record.ttl, data_at);
    }

    /// Adds one record whose RDATA `write` appends to the buffer it is given (in the form
    /// [`RData::to_wire`] writes). `owner` must be a lower-cased absolute wire name. When
    /// `write` fails nothing is added and its error is returned.
    pub fn push_with<E>(
        &mut self,
        owner: &[u8],
        rtype: RType,
        ttl: u32,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let data_at = self.data.len();
        if let Err(e) = write(&mut self.data) {
            self.data.truncate(data_at);
            return Err(e);
        }
        self.add_item(owner, rtype, ttl, data_at);
        Ok(())
    }

    /// Records the item for RDATA already written from `data_at` on.
    fn add_item(&mut self, owner: &[u8], rtype: RType, ttl: u32, data_at: usize) {
        debug_assert!(Name::from_wire(owner).is_some_and(|n| n.wire() == owner));
        let data_len = self.data.len() - data_at;
        assert!(
            data_len <= usize::from(u16::MAX) && self.data.len() <= u32::MAX as usize,
            "RDATA and record buffers are bounded by the wire format"
        );
        let name_at = match self.items.last() {
            Some(last) if last.owner(&self.names) == owner => last.name_at,
            _ => {
                let at = self.names.len();
                self.names.extend_from_slice(owner);
                at as u32
            }
        };
        self.items.push(Item {
            name_at,
            data_at: data_at as u32,
            ttl,
            rtype,
            data_len: data_len as u16,
            name_len: owner.len() as u8,
        });
    }

    /// Keeps only the records `keep` accepts, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, RecordRef<'_>) -> bool) {
        let mut index = 0;
        let (names, data) = (&self.names, &self.data);
        self.items.retain(|i| {
            index += 1;
            keep(index - 1, i.view(names, data))
        });
    }

    /// The owner buffer, the RDATA buffer and the items placing each record in them: what
    /// the zone builder takes over.
    pub(crate) fn into_parts(self) -> (Vec<u8>, Vec<u8>, Vec<Item>) {
        (self.names, self.data, self.items)
    }
}

impl fmt::Debug for Records {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|r| r.to_record()))
            .finish()
    }
}

impl PartialEq for Records {
    fn eq(&self, other: &Records) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Records {}

impl Extend<Record> for Records {
    fn extend<I: IntoIterator<Item = Record>>(&mut self, iter: I) {
        for r in iter {
            self.push(r);
        }
    }
}

impl FromIterator<Record> for Records {
    fn from_iter<I: IntoIterator<Item = Record>>(iter: I) -> Records {
        let mut records = Records::new();
        records.extend(iter);
        records
    }
}
