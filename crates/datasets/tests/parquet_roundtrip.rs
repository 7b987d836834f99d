//! `write_parquet` writes what `generate_batch` generates, readable by the parquet crate.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, TimeUnit, TimestampMillisecondType, TimestampSecondType};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tessera_common::Error;
use tessera_datasets::{GenOptions, generate_batch, hits, write_parquet};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-datasets-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn write_and_read_back_50k_rows() {
    let dir = temp_dir("roundtrip");
    let path = dir.join("hits.parquet");
    let opts = GenOptions {
        rows: 50_000,
        row_group_rows: 20_000,
        batch_rows: 8_192,
        ..GenOptions::default()
    };
    let last = AtomicU64::new(0);
    let report = write_parquet(&path, &opts, &|done| {
        assert!(done > last.load(Ordering::Relaxed));
        last.store(done, Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(last.load(Ordering::Relaxed), 50_000);
    assert_eq!(report.rows, 50_000);
    assert_eq!(report.row_groups, 3);
    assert_eq!(report.file_bytes, std::fs::metadata(&path).unwrap().len());
    // Only the file itself is left in the directory (the temporary file was renamed).
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);

    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap();
    assert_eq!(builder.metadata().num_row_groups(), 3);
    assert_eq!(builder.metadata().row_group(0).num_rows(), 20_000);
    assert_eq!(builder.schema(), &hits::parquet_schema());
    let batches: Vec<RecordBatch> = builder
        .with_batch_size(50_000)
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let read = arrow::compute::concat_batches(&hits::parquet_schema(), &batches).unwrap();
    assert_eq!(read.num_rows(), 50_000);

    let want = generate_batch(&opts, 0, 50_000);
    for name in [
        "WatchID",
        "UserID",
        "URL",
        "Title",
        "SearchPhrase",
        "EventDate",
        "ClientIP",
        "ResolutionWidth",
        "CLID",
    ] {
        assert_eq!(
            read.column_by_name(name).unwrap(),
            want.column_by_name(name).unwrap(),
            "{name}"
        );
    }
    // Timestamps are stored in milliseconds, with the same instants.
    for name in ["EventTime", "ClientEventTime", "LocalEventTime"] {
        let got = read.column_by_name(name).unwrap();
        assert_eq!(
            got.data_type(),
            &DataType::Timestamp(TimeUnit::Millisecond, None)
        );
        let got = got.as_primitive::<TimestampMillisecondType>();
        let secs = want.column_by_name(name).unwrap();
        let secs = secs.as_primitive::<TimestampSecondType>();
        assert!(
            got.values()
                .iter()
                .zip(secs.values())
                .all(|(ms, s)| *ms == s * 1000),
            "{name}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_options_and_paths_are_errors() {
    let dir = temp_dir("errors");
    let bad = GenOptions {
        row_group_rows: 0,
        ..GenOptions::new(10)
    };
    assert!(matches!(
        write_parquet(&dir.join("x.parquet"), &bad, &|_| {}),
        Err(Error::InvalidArgument(_))
    ));
    let missing = dir.join("no/such/dir/x.parquet");
    assert!(matches!(
        write_parquet(&missing, &GenOptions::new(10), &|_| {}),
        Err(Error::Io { .. })
    ));
    assert!(matches!(
        write_parquet(std::path::Path::new("/"), &GenOptions::new(10), &|_| {}),
        Err(Error::InvalidArgument(_))
    ));
    // A table of 0 rows is a valid, empty file.
    let empty = dir.join("empty.parquet");
    let report = write_parquet(&empty, &GenOptions::new(0), &|_| {}).unwrap();
    assert_eq!((report.rows, report.row_groups), (0, 0));
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&empty).unwrap()).unwrap();
    assert_eq!(reader.metadata().file_metadata().num_rows(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}
