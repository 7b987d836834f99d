//! One builder per `hits` column, from the rows' [`Core`] choices.
//!
//! Calibrated columns (UserID, EventTime, SearchPhrase, URL, Title, Referer, ClientIP,
//! RegionID, CounterID, AdvEngineID, SearchEngineID, ResolutionWidth, WatchID) follow the
//! model; the others get cheap plausible values of the right type (mostly small codes and
//! mostly-empty strings), drawn from the row hash (`row(c, name)`) or, for attributes of a
//! visitor or a device, from the user hash (`user(c, name)`), with a salt derived from the
//! column name so that columns do not share randomness.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Date32Array, Int16Array, Int32Array, Int64Array, StringArray, TimestampSecondArray,
};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};

use super::{Core, Model};
use crate::model::{self, Pick, UserClass};
use crate::rng::{below, hash, mix64, rehash, unit};

/// Salt of a column's random stream: FNV-1a of its name.
fn name_salt(name: &str) -> u64 {
    name.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01B3)
    })
}

fn i16s(cores: &[Core], f: impl Fn(&Core) -> i16) -> ArrayRef {
    Arc::new(Int16Array::from_iter_values(cores.iter().map(f)))
}

fn i32s(cores: &[Core], f: impl Fn(&Core) -> i32) -> ArrayRef {
    Arc::new(Int32Array::from_iter_values(cores.iter().map(f)))
}

fn i64s(cores: &[Core], f: impl Fn(&Core) -> i64) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(cores.iter().map(f)))
}

/// A Utf8 column whose row values `f` appends to the value buffer.
fn strings(cores: &[Core], bytes_hint: usize, mut f: impl FnMut(&Core, &mut Vec<u8>)) -> ArrayRef {
    let mut values = Vec::with_capacity(cores.len() * bytes_hint);
    let mut offsets = Vec::with_capacity(cores.len() + 1);
    offsets.push(0i32);
    for c in cores {
        f(c, &mut values);
        // MAX_BATCH_ROWS keeps a column far below i32::MAX bytes (values are < 1 KB).
        offsets.push(i32::try_from(values.len()).expect("string column of a batch below 2 GiB"));
    }
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    // All rendered bytes come from UTF-8 string literals and ASCII: validation cannot fail.
    Arc::new(
        StringArray::try_new(offsets, Buffer::from_vec(values), None)
            .expect("generated strings are valid UTF-8"),
    )
}

/// A Utf8 column of static strings.
fn labels(cores: &[Core], f: impl Fn(&Core) -> &'static str) -> ArrayRef {
    strings(cores, 4, |c, out| out.extend_from_slice(f(c).as_bytes()))
}

/// `items[k]` for a uniform `k` taken from hash `h`.
fn choose<T: Copy>(h: u64, items: &[T]) -> T {
    items[below(h, items.len() as u64) as usize]
}

/// `1` with probability `p`.
fn flag(h: u64, p: f64) -> i16 {
    i16::from(unit(h) < p)
}

/// A mostly-empty label: `""` except with probability `p`, then one of `items`.
fn sparse(h: u64, p: f64, items: &[&'static str]) -> &'static str {
    if unit(h) < p {
        choose(rehash(h, 1), items)
    } else {
        ""
    }
}

/// Region of a row: the user's region (users are almost single-region: 0.4% of rows come
/// from another one, giving the 1.8% extra (RegionID, UserID) pairs of the real data).
fn region(m: &Model, c: &Core) -> i32 {
    let r = rehash(c.h, 0x5247);
    let u = if unit(r) < 0.004 {
        unit(rehash(r, 1))
    } else {
        unit(rehash(c.user_h, 0x5247))
    };
    m.region_ids[m.regions.sample(u)]
}

fn adv_engine(m: &Model, c: &Core) -> i16 {
    let r = rehash(c.h, 0x0041_4456);
    if unit(r) < model::ADV_NONZERO_SHARE {
        model::ADV_ENGINES[m.adv_engines.sample(unit(rehash(r, 1)))].0
    } else {
        0
    }
}

fn resolution(m: &Model, c: &Core) -> (i16, i16) {
    let r = model::RESOLUTIONS[m.resolutions.sample(unit(rehash(c.user_h, 0x0052_4553)))];
    (r.0, r.1)
}

fn is_mobile(c: &Core) -> bool {
    unit(rehash(c.user_h, 0x004D_4F42)) < 0.06
}

fn url_pick(m: &Model, c: &Core) -> Pick {
    m.url.pick(rehash(c.h, super::salt::URL), c.row)
}

fn referer_pick(m: &Model, c: &Core) -> Pick {
    m.referer.pick(rehash(c.h, super::salt::REFERER), c.row)
}

/// A 64-bit hash column of a string value (equal strings ⇔ equal hashes).
fn value_hash(m: &Model, salt: u64, pick: Pick, rank0: i64) -> i64 {
    match pick {
        // The constants of Q41 (RefererHash) and Q42 (URLHash) belong to the top values.
        Pick::Head(0) => rank0,
        p => hash(m.seed, salt, p.id()) as i64,
    }
}

/// Builds column `name` of the rows `cores`.
///
/// # Panics
/// If `name` is not a `hits` column (the caller passes the schema's own names).
pub(super) fn column(m: &Model, name: &str, cores: &[Core]) -> ArrayRef {
    let s = name_salt(name);
    let row = move |c: &Core| rehash(c.h, s);
    let user = move |c: &Core| rehash(c.user_h, s);
    match name {
        "WatchID" => i64s(cores, |c| c.watch_id),
        "JavaEnable" => i16s(cores, |c| flag(user(c), 0.75)),
        "Title" => strings(cores, 64, |c, out| {
            m.title
                .append(m.title.pick(rehash(c.h, super::salt::TITLE), c.row), out)
        }),
        "GoodEvent" => i16s(cores, |c| 1 - flag(row(c), 0.001)),
        "EventTime" => Arc::new(TimestampSecondArray::from_iter_values(
            cores.iter().map(|c| c.time),
        )),
        "EventDate" => {
            Arc::new(Date32Array::from_iter_values(cores.iter().map(|c| {
                (c.time + model::LOCAL_OFFSET).div_euclid(86_400) as i32
            })))
        }
        "CounterID" => i32s(cores, |c| m.counter_ids[m.counters.sample(unit(row(c)))]),
        "ClientIP" => i32s(cores, |c| c.client_ip),
        "RegionID" => i32s(cores, |c| region(m, c)),
        "UserID" => i64s(cores, |c| c.user_id),
        "CounterClass" => i16s(cores, |c| (row(c) % 4).min(2) as i16),
        "OS" => i16s(cores, |c| {
            choose(user(c), &[2, 2, 2, 44, 44, 3, 71, 56, 1, 7, 24, 39, 97])
        }),
        "UserAgent" => i16s(cores, |c| {
            choose(user(c), &[7, 7, 2, 3, 4, 5, 6, 28, 14, 9, 10, 11])
        }),
        "URL" => strings(cores, 96, |c, out| m.url.append(url_pick(m, c), out)),
        "Referer" => strings(cores, 72, |c, out| {
            m.referer.append(referer_pick(m, c), out)
        }),
        "IsRefresh" => i16s(cores, |c| flag(row(c), 0.08)),
        "RefererCategoryID" => i16s(cores, |c| choose(row(c), &[0, 0, 0, 1, 3, 5, 12, 16, 20])),
        "RefererRegionID" => i32s(cores, |c| if unit(row(c)) < 0.7 { region(m, c) } else { 0 }),
        "URLCategoryID" => i16s(cores, |c| choose(row(c), &[0, 0, 1, 3, 5, 12, 16, 20])),
        "URLRegionID" => i32s(cores, |c| if unit(row(c)) < 0.8 { region(m, c) } else { 0 }),
        "ResolutionWidth" => i16s(cores, |c| resolution(m, c).0),
        "ResolutionHeight" => i16s(cores, |c| resolution(m, c).1),
        "ResolutionDepth" => i16s(cores, |c| choose(user(c), &[24, 32, 32, 32, 16])),
        "FlashMajor" => i16s(cores, |c| choose(user(c), &[0, 0, 11, 11, 11, 10, 9])),
        "FlashMinor" => i16s(cores, |c| choose(user(c), &[0, 0, 1, 2, 3, 5, 7, 8])),
        "FlashMinor2" => labels(cores, |c| {
            choose(user(c), &["", "", "0", "1", "7", "8", "58"])
        }),
        "NetMajor" => i16s(cores, |c| choose(user(c), &[0, 0, 0, 1, 2, 3, 4])),
        "NetMinor" => i16s(cores, |c| choose(user(c), &[0, 0, 0, 1, 5, 7, 10])),
        "UserAgentMajor" => i16s(cores, |c| below(user(c), 40) as i16),
        "UserAgentMinor" => labels(cores, |c| {
            choose(user(c), &["0", "0", "1", "2", "5", "4a", "0a", ""])
        }),
        "CookieEnable" => i16s(cores, |c| 1 - flag(user(c), 0.02)),
        "JavascriptEnable" => i16s(cores, |c| 1 - flag(user(c), 0.01)),
        "IsMobile" => i16s(cores, |c| i16::from(is_mobile(c))),
        "MobilePhone" => i16s(cores, |c| {
            if is_mobile(c) {
                choose(user(c), &[1, 1, 1, 3, 5, 7])
            } else {
                0
            }
        }),
        "MobilePhoneModel" => labels(cores, |c| {
            if is_mobile(c) {
                choose(
                    user(c),
                    &[
                        "iPad", "iPad", "iPad", "iPad", "iPhone", "GT-I9300", "HTC One",
                    ],
                )
            } else {
                ""
            }
        }),
        "Params" => labels(cores, |c| {
            sparse(row(c), 0.01, &["p=1", "from=rss", "page=2"])
        }),
        "IPNetworkID" => i32s(cores, |c| ((c.client_ip as u32 >> 11) % 4_000_000) as i32),
        "TraficSourceID" => i16s(cores, |c| {
            if c.search_engine != 0 {
                2
            } else if adv_engine(m, c) != 0 {
                3
            } else {
                choose(row(c), &[-1, -1, 0, 0, 0, 1, 1, 5, 6, 7, 8])
            }
        }),
        "SearchEngineID" => i16s(cores, |c| c.search_engine),
        "SearchPhrase" => strings(cores, 6, |c, out| m.phrase.append(c.phrase, out)),
        "AdvEngineID" => i16s(cores, |c| adv_engine(m, c)),
        "IsArtifical" => i16s(cores, |c| flag(row(c), 0.001)),
        "WindowClientWidth" => i16s(cores, |c| {
            let w = resolution(m, c).0;
            if unit(row(c)) < 0.05 {
                0
            } else {
                w - (below(rehash(row(c), 1), 40) as i16).min(w)
            }
        }),
        "WindowClientHeight" => i16s(cores, |c| {
            let h = resolution(m, c).1;
            if unit(row(c)) < 0.05 {
                0
            } else {
                h - (below(rehash(row(c), 1), 200) as i16).min(h)
            }
        }),
        "ClientTimeZone" => i16s(cores, |c| choose(user(c), &[-1, 4, 4, 4, 3, 2, 6])),
        "ClientEventTime" => Arc::new(TimestampSecondArray::from_iter_values(
            cores
                .iter()
                .map(|c| c.time + below(user(c), 601) as i64 - 300),
        )),
        "SilverlightVersion1" => i16s(cores, |c| choose(user(c), &[0, 0, 5])),
        "SilverlightVersion2" => i16s(cores, |c| choose(user(c), &[0, 0, 1])),
        "SilverlightVersion3" => i32s(cores, |c| choose(user(c), &[0, 0, 61118, 51204])),
        "SilverlightVersion4" => i16s(cores, |c| choose(user(c), &[0, 0, 0, 1])),
        "PageCharset" => labels(cores, |c| {
            choose(row(c), &["utf-8", "utf-8", "windows-1251", ""])
        }),
        "CodeVersion" => i32s(cores, |c| choose(row(c), &[0, 500, 530, 615, 689, 711])),
        "IsLink" => i16s(cores, |c| flag(row(c), 0.02)),
        "IsDownload" => i16s(cores, |c| flag(row(c), 0.001)),
        "IsNotBounce" => i16s(cores, |c| flag(row(c), 0.2)),
        "FUniqID" => i64s(cores, |c| {
            if unit(user(c)) < 0.4 {
                (mix64(user(c)) >> 1) as i64
            } else {
                0
            }
        }),
        "OriginalURL" => strings(cores, 64, |c, out| {
            m.original_url.append(
                m.original_url
                    .pick(rehash(c.h, super::salt::ORIGINAL_URL), c.row),
                out,
            )
        }),
        "HID" => i32s(cores, |c| (row(c) >> 33) as i32),
        "IsOldCounter" => i16s(cores, |c| flag(row(c), 0.3)),
        "IsEvent" => i16s(cores, |c| flag(row(c), 0.01)),
        "IsParameter" => i16s(cores, |c| flag(row(c), 0.005)),
        "DontCountHits" => i16s(cores, |c| flag(row(c), 0.01)),
        "WithHash" => i16s(cores, |c| flag(row(c), 0.03)),
        "HitColor" => labels(cores, |c| choose(row(c), &["E", "E", "E", "D", "F", "5"])),
        "LocalEventTime" => Arc::new(TimestampSecondArray::from_iter_values(
            cores.iter().map(|c| c.time + model::LOCAL_OFFSET),
        )),
        "Age" => i16s(cores, |c| {
            choose(user(c), &[0, 0, 0, 17, 18, 25, 35, 45, 55])
        }),
        "Sex" => i16s(cores, |c| choose(user(c), &[0, 0, 1, 2])),
        "Income" => i16s(cores, |c| choose(user(c), &[0, 0, 1, 2, 3, 4])),
        "Interests" => i16s(cores, |c| {
            if unit(user(c)) < 0.5 {
                0
            } else {
                below(rehash(user(c), 1), 32_768) as i16
            }
        }),
        "Robotness" => i16s(cores, |c| if c.class == UserClass::Bot { 1 } else { 0 }),
        "RemoteIP" => i32s(cores, |c| {
            if unit(row(c)) < 0.9 {
                c.client_ip
            } else {
                (row(c) >> 32) as i32
            }
        }),
        "WindowName" => i32s(cores, |c| {
            if unit(row(c)) < 0.6 {
                -1
            } else {
                (rehash(row(c), 1) >> 33) as i32
            }
        }),
        "OpenerName" => i32s(cores, |c| {
            if unit(row(c)) < 0.8 {
                -1
            } else {
                (rehash(row(c), 1) >> 33) as i32
            }
        }),
        "HistoryLength" => i16s(cores, |c| below(row(c), 16) as i16),
        "BrowserLanguage" => labels(cores, |c| {
            choose(user(c), &["ru", "ru", "ru", "en", "uk", "be", "kk", "de"])
        }),
        "BrowserCountry" => labels(cores, |c| {
            choose(user(c), &["ru", "ru", "ru", "ua", "by", "kz", "de", "us"])
        }),
        "SocialNetwork" => labels(cores, |c| {
            sparse(
                row(c),
                0.01,
                &["vkontakte", "facebook", "odnoklassniki", "twitter"],
            )
        }),
        "SocialAction" => labels(cores, |c| {
            sparse(row(c), 0.002, &["like", "share", "comment"])
        }),
        "HTTPError" => i16s(cores, |c| {
            if unit(row(c)) < 0.002 {
                choose(rehash(row(c), 1), &[404, 500, 403])
            } else {
                0
            }
        }),
        "SendTiming"
        | "DNSTiming"
        | "ConnectTiming"
        | "ResponseStartTiming"
        | "ResponseEndTiming"
        | "FetchTiming" => i32s(cores, |c| {
            if unit(row(c)) < 0.8 {
                0
            } else {
                below(rehash(row(c), 1), 2_000) as i32
            }
        }),
        "SocialSourceNetworkID" => i16s(cores, |c| {
            if unit(row(c)) < 0.01 {
                choose(rehash(row(c), 1), &[1, 2, 3, 5])
            } else {
                0
            }
        }),
        "SocialSourcePage" => labels(cores, |c| {
            sparse(
                row(c),
                0.005,
                &[
                    "http://vk.com/feed",
                    "http://ok.ru/",
                    "http://facebook.com/",
                ],
            )
        }),
        "ParamPrice" => i64s(cores, |c| {
            if unit(row(c)) < 0.001 {
                below(rehash(row(c), 1), 1_000_000) as i64
            } else {
                0
            }
        }),
        "ParamOrderID" => labels(cores, |c| {
            sparse(row(c), 0.001, &["1", "42", "1001", "A-17"])
        }),
        "ParamCurrency" => labels(cores, |c| sparse(row(c), 0.001, &["RUB", "USD", "EUR"])),
        "ParamCurrencyID" => i16s(cores, |c| {
            if unit(row(c)) < 0.001 {
                choose(rehash(row(c), 1), &[643, 840, 978])
            } else {
                0
            }
        }),
        "OpenstatServiceName" => labels(cores, |c| {
            sparse(row(c), 0.001, &["direct.yandex.ru", "begun.ru"])
        }),
        "OpenstatCampaignID" => labels(cores, |c| sparse(row(c), 0.001, &["1", "12", "4321"])),
        "OpenstatAdID" => labels(cores, |c| sparse(row(c), 0.001, &["7", "77", "777"])),
        "OpenstatSourceID" => labels(cores, |c| sparse(row(c), 0.001, &["mail.ru", "yandex.ru"])),
        "UTMSource" => labels(cores, |c| {
            sparse(row(c), 0.005, &["yandex", "google", "vk", "email"])
        }),
        "UTMMedium" => labels(cores, |c| {
            sparse(row(c), 0.005, &["cpc", "banner", "email"])
        }),
        "UTMCampaign" => labels(cores, |c| {
            sparse(row(c), 0.005, &["summer", "sale", "brand"])
        }),
        "UTMContent" => labels(cores, |c| sparse(row(c), 0.002, &["text", "image"])),
        "UTMTerm" => labels(cores, |c| sparse(row(c), 0.002, &["buy", "cheap", "price"])),
        "FromTag" => labels(cores, |c| {
            sparse(row(c), 0.002, &["mail", "rss", "twitter"])
        }),
        "HasGCLID" => i16s(cores, |c| flag(row(c), 0.002)),
        "RefererHash" => i64s(cores, |c| {
            value_hash(m, s, referer_pick(m, c), 3_594_120_000_172_545_465)
        }),
        "URLHash" => i64s(cores, |c| {
            value_hash(m, s, url_pick(m, c), 2_868_770_270_353_813_622)
        }),
        "CLID" => i32s(cores, |c| {
            if unit(row(c)) < 0.02 {
                below(rehash(row(c), 1), 1_000) as i32
            } else {
                0
            }
        }),
        other => panic!("hits has no column named {other}"),
    }
}
