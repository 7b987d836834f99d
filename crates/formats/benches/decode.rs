//! Criterion benchmarks of reading the binary formats (what `INSERT .. FORMAT F` and
//! `tessera bench --suite formats`' writes do before the rows reach a table): the seed's
//! Mixed row (`Int8`, `UInt64`, `String`: `(number % 256)::Int8, number, toString(number)`),
//! 1M rows serialized in memory, read back into batches on 1 thread and on every thread
//! of this machine (parallel parsing), without and with LZ4 blocks. Ids
//! `decode/<format>/<compression>/<threads>t`.
//!
//! ```text
//! cargo bench -p tessera-formats --bench decode
//! ```
//!
//! Memory comes from jemalloc, as in the `tessera` binary: the system allocator returns
//! large freed blocks to the kernel, and fresh pages are most of the cost on some VMs.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int8Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tessera_formats::{Compression, Format, Input, ReadOptions, WriteOptions};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const ROWS: u64 = 1 << 20;
const BATCH: u64 = 65_536;

fn mixed() -> (Arc<Schema>, Vec<RecordBatch>) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int8, false),
        Field::new("b", DataType::UInt64, false),
        Field::new("c", DataType::Utf8, false),
    ]));
    let batches = (0..ROWS / BATCH)
        .map(|k| {
            let n = k * BATCH..(k + 1) * BATCH;
            let cols: Vec<ArrayRef> = vec![
                Arc::new(Int8Array::from_iter_values(n.clone().map(|v| (v % 256) as u8 as i8))),
                Arc::new(UInt64Array::from_iter_values(n.clone())),
                Arc::new(StringArray::from_iter_values(n.map(|v| v.to_string()))),
            ];
            RecordBatch::try_new(schema.clone(), cols).expect("batch")
        })
        .collect();
    (schema, batches)
}

fn decode(c: &mut Criterion) {
    let (schema, batches) = mixed();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut group = c.benchmark_group("decode");
    group.sample_size(20);
    group.throughput(Throughput::Elements(ROWS));
    for format in [Format::Native, Format::RowBinary] {
        for (cname, compression) in [("none", Compression::None), ("lz4", Compression::Lz4)] {
            let mut bytes = Vec::new();
            {
                let mut w = tessera_formats::writer(format, &schema, Box::new(&mut bytes), &WriteOptions { compression })
                    .expect("writer");
                for b in &batches {
                    w.write(b).expect("write");
                }
                w.finish().expect("finish");
            }
            let opts = ReadOptions { compression, schema: Some(schema.clone()), source: "<bench>".into() };
            for t in [1, threads] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build().expect("pool");
                group.bench_function(format!("{}/{cname}/{t}t", format.name()), |bench| {
                    bench.iter(|| {
                        pool.install(|| {
                            let input = Input::Stream(Box::new(std::io::Cursor::new(bytes.as_slice())));
                            let rows: usize = tessera_formats::reader(format, input, &opts)
                                .expect("reader")
                                .map(|b| b.expect("batch").num_rows())
                                .sum();
                            assert_eq!(rows as u64, ROWS);
                        })
                    })
                });
                if threads == 1 {
                    break;
                }
            }
        }
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
