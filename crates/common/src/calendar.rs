//! Proleptic Gregorian calendar arithmetic on day numbers (days since 1970-01-01), shared by
//! the text readers and writers. Algorithms: Howard Hinnant, "chrono-Compatible Low-Level
//! Date Algorithms" (<http://howardhinnant.github.io/date_algorithms.html>), valid for
//! every `i64` year whose day number fits `i64`.

/// Whether `y` is a leap year.
pub fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// Days in month `m` (1..=12) of year `y`; 31 for any other `m`.
pub fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of date `y-m-d` (`m` in 1..=12, `d` in 1..=31; not validated).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of day number `z` (inverse of [`days_from_civil`]).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_numbers_round_trip_and_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(2013, 7, 15), 15_901);
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        assert_eq!(days_from_civil(0, 3, 1), -719_468);
        assert_eq!((days_in_month(1900, 2), days_in_month(2000, 2), days_in_month(2013, 4)), (28, 29, 30));
        // Every day of 1600-01-01 .. 2400-12-31 (leap rules of 100 and 400 included).
        let (mut y, mut m, mut d) = (1600, 1, 1);
        for z in days_from_civil(1600, 1, 1)..=days_from_civil(2400, 12, 31) {
            assert_eq!(civil_from_days(z), (y, m, d));
            assert_eq!(days_from_civil(y, m, d), z);
            d += 1;
            if d > days_in_month(y, m) {
                (d, m) = (1, m + 1);
                if m > 12 {
                    (m, y) = (1, y + 1);
                }
            }
        }
    }
}
