//! Per-command latency histograms (Redis 7.0's `latency-tracking`): what
//! LATENCY HISTOGRAM and INFO latencystats report.
//!
//! Redis keeps one HdrHistogram per command (`hdr_init(1, 1e9, 2)`: one
//! nanosecond to one second, two significant digits) and reports it
//! through the histogram's own iterators, whose quirks show in the
//! replies (a log-bucket step reports the cumulative count and the
//! highest equivalent value of the first *recorded* bucket past the
//! step). To answer byte for byte, this module is a port of exactly the
//! parts of `deps/hdr_histogram` Redis uses, for that one fixed
//! configuration, rather than a general crate: the `hdrhistogram` crate
//! is a bench-only dependency (see `.ci/run`), and its iterators do not
//! promise the C library's reporting points anyway. The counts are a
//! flat array of 3072 buckets (24 KiB), allocated on a command's first
//! recorded run.

/// Redis's `LATENCY_HISTOGRAM_MIN_VALUE` / `_MAX_VALUE`, in nanoseconds.
const MIN_VALUE: u64 = 1;
const MAX_VALUE: u64 = 1_000_000_000;
/// `hdr_calculate_bucket_config(1, 1e9, 2)`: unit magnitude 0, 256 sub
/// buckets (half: 128, magnitude 7), 23 buckets.
const SUB_BUCKET_HALF_COUNT_MAGNITUDE: u32 = 7;
const SUB_BUCKET_HALF_COUNT: i64 = 128;
const SUB_BUCKET_COUNT: i64 = 256;
const SUB_BUCKET_MASK: u64 = 255;
const COUNTS_LEN: usize = 24 * 128;

/// One command's latencies, in nanoseconds.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    counts: Box<[u64]>,
    total: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: vec![0; COUNTS_LEN].into_boxed_slice(),
            total: 0,
        }
    }
}

fn bucket_index(value: u64) -> i64 {
    let pow2ceiling = 64 - (value | SUB_BUCKET_MASK).leading_zeros() as i64;
    pow2ceiling - (SUB_BUCKET_HALF_COUNT_MAGNITUDE as i64 + 1)
}

fn sub_bucket_index(value: u64, bucket: i64) -> i64 {
    (value >> bucket) as i64
}

fn counts_index(bucket: i64, sub_bucket: i64) -> i64 {
    ((bucket + 1) << SUB_BUCKET_HALF_COUNT_MAGNITUDE) + sub_bucket - SUB_BUCKET_HALF_COUNT
}

fn value_at_index(index: i64) -> u64 {
    let mut bucket = (index >> SUB_BUCKET_HALF_COUNT_MAGNITUDE) - 1;
    let mut sub_bucket = (index & (SUB_BUCKET_HALF_COUNT - 1)) + SUB_BUCKET_HALF_COUNT;
    if bucket < 0 {
        sub_bucket -= SUB_BUCKET_HALF_COUNT;
        bucket = 0;
    }
    (sub_bucket as u64) << bucket
}

fn range_size(bucket: i64, sub_bucket: i64) -> u64 {
    let adjusted = if sub_bucket >= SUB_BUCKET_COUNT { bucket + 1 } else { bucket };
    1u64 << adjusted
}

fn lowest_equivalent(value: u64) -> u64 {
    let bucket = bucket_index(value);
    (sub_bucket_index(value, bucket) as u64) << bucket
}

fn highest_equivalent(value: u64) -> u64 {
    let bucket = bucket_index(value);
    let sub_bucket = sub_bucket_index(value, bucket);
    ((sub_bucket as u64) << bucket) + range_size(bucket, sub_bucket) - 1
}

impl LatencyHistogram {
    /// Records one run of `duration_ns` (Redis's
    /// `updateCommandLatencyHistogram`: clamped to 1 ns ..= 1 s).
    pub fn record(&mut self, duration_ns: u64) {
        let value = duration_ns.clamp(MIN_VALUE, MAX_VALUE);
        let bucket = bucket_index(value);
        let index = counts_index(bucket, sub_bucket_index(value, bucket)) as usize;
        self.counts[index] += 1;
        self.total += 1;
    }

    pub fn total_count(&self) -> u64 {
        self.total
    }

    /// `hdr_value_at_percentile`, in nanoseconds.
    pub fn value_at_percentile(&self, percentile: f64) -> u64 {
        let requested = if percentile < 100.0 { percentile } else { 100.0 };
        let wanted = (((requested / 100.0) * self.total as f64) + 0.5) as i64;
        let wanted = wanted.max(1) as u64;
        let mut seen = 0u64;
        let mut value = 0;
        for (index, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= wanted {
                value = value_at_index(index as i64);
                break;
            }
        }
        if percentile == 0.0 {
            lowest_equivalent(value)
        } else {
            highest_equivalent(value)
        }
    }

    /// The points LATENCY HISTOGRAM lists (Redis's `fillCommandCDF`): a
    /// log iteration from 1024 ns doubling, each step reported as
    /// (microseconds, cumulative count) when its count grew.
    pub fn cumulative_usec(&self) -> Vec<(u64, u64)> {
        let mut iter = LogIter::new(self);
        let mut points = Vec::new();
        let mut previous = 0;
        while iter.next() {
            if iter.cumulative_count > previous {
                points.push((iter.highest_equivalent_value / 1000, iter.cumulative_count));
            }
            previous = iter.cumulative_count;
        }
        points
    }
}

/// `hdr_iter_log_init(iter, h, 1024, 2)` and `log_iter_next`, as the C
/// library steps them.
struct LogIter<'h> {
    h: &'h LatencyHistogram,
    counts_index: i64,
    cumulative_count: u64,
    value: u64,
    highest_equivalent_value: u64,
    next_level: u64,
    next_level_lowest: u64,
}

impl<'h> LogIter<'h> {
    fn new(h: &'h LatencyHistogram) -> Self {
        LogIter {
            h,
            counts_index: -1,
            cumulative_count: 0,
            value: 0,
            highest_equivalent_value: 0,
            next_level: 1024,
            next_level_lowest: lowest_equivalent(1024),
        }
    }

    fn move_next(&mut self) -> bool {
        self.counts_index += 1;
        if self.counts_index >= COUNTS_LEN as i64 {
            return false;
        }
        self.cumulative_count += self.h.counts[self.counts_index as usize];
        let value = value_at_index(self.counts_index);
        let bucket = bucket_index(value);
        let sub_bucket = sub_bucket_index(value, bucket);
        let lowest = (sub_bucket as u64) << bucket;
        self.value = value;
        self.highest_equivalent_value = lowest + range_size(bucket, sub_bucket) - 1;
        true
    }

    fn next_value_above(&self, bound: u64) -> bool {
        self.counts_index < COUNTS_LEN as i64 && value_at_index(self.counts_index + 1) > bound
    }

    fn next(&mut self) -> bool {
        if self.cumulative_count < self.h.total || self.next_value_above(self.next_level_lowest) {
            loop {
                if self.value >= self.next_level_lowest {
                    self.next_level *= 2;
                    self.next_level_lowest = lowest_equivalent(self.next_level);
                    return true;
                }
                if !self.move_next() {
                    return true;
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact_and_large_ones_share_buckets() {
        assert_eq!(highest_equivalent(200), 200);
        assert_eq!(lowest_equivalent(1000), 1000 & !3);
        assert_eq!(highest_equivalent(1_000_000), lowest_equivalent(1_000_000) + (1 << 12) - 1);
    }

    #[test]
    fn one_run_of_a_few_microseconds_is_reported_as_redis_reports_it() {
        let mut h = LatencyHistogram::default();
        h.record(3000);
        // Steps report the bucket that starts each power of two: 3000 ns
        // is first counted at 4096's, whose highest equivalent is 4111.
        assert_eq!(h.cumulative_usec(), vec![(4, 1)]);
        assert_eq!(h.value_at_percentile(50.0), 3007);
    }

    #[test]
    fn an_empty_run_is_one_nanosecond() {
        let mut h = LatencyHistogram::default();
        h.record(0);
        assert_eq!(h.cumulative_usec(), vec![(1, 1)]);
        assert_eq!(h.value_at_percentile(99.9), 1);
    }
}
