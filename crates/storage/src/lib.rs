//! Tessera's on-disk column storage, after ClickHouse's MergeTree: a table is a set of
//! immutable **parts**; a part holds rows sorted by the table's sort key, cut into
//! **granules** of 8,192 rows; each column is a file of compressed, checksummed **blocks**;
//! **marks** map granules to blocks; a **sparse primary index** (the first key of each
//! granule) and per-granule min/max of every column let a WHERE clause skip granules.
//! Reads go through `memmap2`; granule ranges decode in parallel into the same aligned
//! chunks (morsels) the in-memory tables use, so the executor does not know the difference.
//!
//! # Database directory
//!
//! ```text
//! DIR/
//! ├── hits/                              one directory per table
//! │   ├── table.json                     table format version (2), schema, sort key, codecs, granule size
//! │   ├── manifest.txt                   the active parts: the commit point of inserts and merges
//! │   ├── 0000000001_0000000001_0/       part MIN_MAX_LEVEL: inserts MIN..=MAX, merged LEVEL times
//! │   ├── 0000000002_0000000009_1/
//! │   ├── detached/unexpected_…/         part directories the manifest did not list, moved aside
//! │   ├── tmp_insert_4242_7/             unfinished part: removed at open
//! │   └── tmp_manifest_4242_8            unfinished manifest write: removed at open
//! └── tmp_create_…/                      unfinished CREATE TABLE: removed at open
//! ```
//!
//! # Table manifest
//!
//! `manifest.txt` names the table's active parts; it is text, checksummed like
//! `checksums.txt`:
//!
//! ```text
//! tessera table manifest 1
//! table<TAB>XXH3_HEX                     xxh3 of table.json
//! part<TAB>NAME<TAB>ROWS<TAB>XXH3_HEX    per active part: rows, xxh3 of its checksums.txt
//! end<TAB>XXH3_HEX                       xxh3 of all preceding bytes
//! ```
//!
//! Since `checksums.txt` covers every other file of a part, the manifest pins the content
//! of every active part. At open (after which nothing else is trusted):
//!
//! * `table.json` missing while the directory holds parts or a manifest, a missing or
//!   damaged manifest, a `table.json` whose hash differs from the manifest's, a listed part
//!   that is missing or has another `checksums.txt` hash or row count (a part directory
//!   deleted, renamed, or replaced by a copy of another part): `Error::Corrupt` naming the
//!   table and the file or part directory. Nothing is answered from the other parts.
//! * A part directory the manifest does not list cannot hold acknowledged rows (the
//!   manifest write is the commit point): if a listed part covers its number range it is
//!   an input of a committed merge whose deletion a crash interrupted, and is removed
//!   (with a warning, as below); otherwise (an insert or merge that crashed between renaming its part into place and
//!   writing the manifest, or a directory copied in) it is moved to
//!   `detached/unexpected_NAME` (as ClickHouse detaches unexpected parts), reported by
//!   `DiskTable::open_warnings` / `Store::warnings` (the CLI prints them to stderr) and
//!   listed by `DiskTable::detached_parts`. Queries never read `detached/`.
//!
//! Table format version 1 (before the manifest) is migrated at open: its parts (after
//! removing those covered by a merged part) are verified and written as the manifest,
//! then `table.json` is rewritten with version 2. A version 1 `table.json` beside a
//! manifest is a migration a crash interrupted: the manifest must record the hash of the
//! version 2 rewrite of that `table.json` and is verified as usual (so editing the version
//! down cannot bypass the manifest). A version above 2 is `Error::Corrupt` ("unsupported
//! format version").
//!
//! # Part directory
//!
//! ```text
//! 0000000002_0000000009_1/
//! ├── c0.bin … cN.bin   column i = blocks, in row order        (verified per block, first read)
//! ├── marks.mrk         granule -> (block offset, row in block) per column
//! ├── primary.idx       first sort-key tuple of each granule   (sparse primary index)
//! ├── minmax.idx        min and max of each column in each granule
//! ├── bloom.idx         per-granule bloom filters of some columns (`column = constant`)
//! ├── meta.json         format version, rows, granules, schema, codecs, sort key
//! └── checksums.txt     size and xxh3 of every other file; written last
//! ```
//!
//! `checksums.txt` is text: a first line `tessera part format 3`, then one line per file
//! `NAME<TAB>BYTES<TAB>XXH3_HEX`, then `end<TAB>XXH3_HEX` over all preceding bytes. At open
//! the sizes of all files and the hashes of the small files are checked; column blocks are
//! checked when read.
//!
//! # Column file and block
//!
//! A column file is a sequence of blocks. A block holds whole granules: it is closed at the
//! first granule boundary where it holds ≥ 256 KiB uncompressed, or at every 8th granule (a
//! morsel boundary), so blocks are 64 KiB-1 MiB except a tail block or a granule of long
//! strings.
//!
//! ```text
//! block:  0        8      9      10       12      16             20            24
//!         +--------+------+------+--------+-------+--------------+-------------+----------------+
//!         | xxh3   |codec | enc  |reserved| rows  | payload bytes| stored bytes| stored payload |
//!         | u64 LE | u8   | u8   | u16 = 0| u32 LE| u32 LE       | u32 LE      | (compressed)   |
//!         +--------+------+------+--------+-------+--------------+-------------+----------------+
//!         xxh3_64 covers bytes 8 .. end of block.  codec: 0 none, 1 LZ4 block, 2 Zstandard.
//!
//! payload: | has_nulls u8 | [validity bitmap, ceil(rows/8) bytes, LSB first] | values |
//!
//! values by enc:
//!   0 plain, fixed width     rows x width bytes, little-endian
//!   0 plain, Utf8/Binary     (rows+1) x u32 offsets from 0 | bytes
//!   3 sized, Utf8/Binary     w u8 (1, 2) | rows x w-byte LE lengths | bytes   (format 2)
//!   1 dictionary (strings)   n u32 | (n+1) x u32 offsets | dict bytes | w u8 (1,2,4) | rows x w-byte ids
//!   2 frame of reference     min i128 LE | bits u8 | ceil(rows*bits/64) x u64 words,
//!     (integers, dates,       value i = min + bits [i*bits, (i+1)*bits) of the word stream
//!      timestamps)
//!   4 sparse (integers,       n u32 | w u8 (1, 2, 4) | n x w-byte LE positions, ascending
//!     no NULLs; format 3)     | n values, plain (the rows not zero; every other row is 0)
//! ```
//!
//! An integer block with no NULLs where at least 15 of 16 values are zero is sparse
//! (ClickHouse's sparse serialization, `ratio_of_defaults_for_sparse_serialization` =
//! 0.9375): a filter that zero fails (`AdvEngineID <> 0`) reads only the other rows'
//! positions and values ([`tessera_common::ColumnSource::load_morsel_sparse`]). Otherwise
//! the encoding is chosen per block by size: frame-of-reference when its bit-packed size is
//! below the plain size, dictionary when the dictionary stays under half of the plain size
//! and the whole encoding is smaller; other strings are sized when every value of the block
//! is under 64 KiB (with light encodings on, `TableOptions::encodings`), plain otherwise
//! (format 1 parts hold no sized blocks). Floats are always plain. NULL slots hold arbitrary
//! values, masked by the bitmap.
//!
//! # Marks and indexes
//!
//! ```text
//! marks.mrk:   "TSMK" | version u32 | columns u32 | granules u32
//!              | for each column, for each granule: block offset u64 | row in block u32
//!              | xxh3 u64 of all preceding bytes
//! primary.idx: "TSPK" | version u32 | key columns u32 | granules u32
//!              | one block (codec none, plain) per key column: its value at each granule's first row
//!              | xxh3 u64
//! minmax.idx:  "TSMM" | version u32 | columns u32 | granules u32
//!              | per column: a block of per-granule minima, a block of maxima (NULL = all NULL)
//!              | xxh3 u64
//! bloom.idx:   "TSBF" | version u32 | n u32 | granules u32 | n x column index u32
//!              | for each of those columns, for each granule: words u32 (a power of two)
//!              |   | words x u64 bit array  (10 bits per distinct value, 3 probes,
//!              |   probe i = xxh3(value) + i * ((xxh3(value) >> 32) | 1) mod bits;
//!              |   integers hashed as i128 LE, strings as their bytes)
//!              | xxh3 u64
//! ```
//!
//! # Granule skipping
//!
//! The executor hands the top-level AND of `column op constant` conditions to the source
//! ([`tessera_common::ColumnSource::prune`]). A granule is kept unless its min/max exclude
//! a condition, or a bloom filter shows an equality constant absent. By default the bloom
//! filters cover the sort-key columns after the first: `UserID = c` (ClickBench Q20) has a
//! wide min/max in almost every granule, because UserID is sorted only inside runs of equal
//! (CounterID, EventDate).
//! Marks, the primary index and min/max are decoded into memory when a part opens (about
//! 35 MB at 100M rows of hits); the bloom filters (546 MiB there) stay in the mapped
//! `bloom.idx` and are probed in place, so an open database's resident memory does not grow
//! with them.
//!
//! # Writes and crash safety
//!
//! An insert sorts its rows by the sort key, writes a part into `tmp_insert_*` inside the
//! table directory, fsyncs every file and the directory, renames it to its final name and
//! fsyncs the table directory; then, under the table's commit lock, it writes the new
//! manifest into `tmp_manifest_*`, fsyncs it, renames it over `manifest.txt` (the commit
//! point) and fsyncs the table directory before acknowledging. A crash before the manifest
//! rename leaves the old manifest: the new part, if already renamed, is detached at the
//! next open. Merges (`OPTIMIZE TABLE`) do the same with a part whose number range covers
//! their inputs, whose manifest drops the inputs; the input directories are deleted after
//! the commit (or by the next open). `CREATE TABLE` writes `table.json` and an empty
//! manifest into `tmp_create_*` and renames the directory into place.
//!
//! # Streaming writes: no 2 GiB walls
//!
//! No column is ever concatenated into one arrow array (whose 32-bit string offsets stop at
//! 2 GiB). An insert takes chunked columns (`DiskTable::insert_chunks`), sorts row
//! references by the key in arrow's row format (stable), and hands the part writer one
//! morsel (8 granules) of sorted rows at a time, gathered from the chunks with arrow's
//! `interleave`; the writer cuts granules and blocks as rows arrive and appends them to the
//! column files. A merge is a k-way merge of the sorted parts (a binary heap of part
//! cursors over their keys; ties go to the earlier part, then the earlier row): each input
//! part is read front to back a block at a time, so memory is bounded by (columns x parts x
//! about one block) plus one morsel of output, and the input pages already decoded are
//! dropped from the process (`MADV_DONTNEED` on the read-only maps). The one remaining
//! limit: a single granule must hold under 2 GiB of strings (else `InvalidArgument` asking
//! for fewer rows per granule).
//!
//! # Errors
//!
//! Damage is reported as [`tessera_common::Error::Corrupt`] with the file path (part
//! directory and file), and in the detail the part, the column and the byte offset of the
//! bad block; never a panic and never a silently wrong answer.

#![warn(missing_docs)]

mod block;
mod cache;
mod conditions;
mod manifest;
mod merge;
mod part;
mod snapshot;
mod store;
mod table;

pub use block::Codec;
pub use cache::{BlockCache, MIN_BLOCK_CACHE_BYTES, default_block_cache_bytes};
pub use conditions::{ConditionCache, DEFAULT_CONDITION_CACHE_BYTES};
pub use snapshot::Caches;
pub use part::{FORMAT_VERSION, MIN_FORMAT_VERSION, Part};
pub use store::Store;
pub use table::{DEFAULT_GRANULE_ROWS, DETACHED_DIR, DiskTable, PartIdKey, TABLE_FORMAT_VERSION, TableOptions};
