//! The latency monitor (Redis's latency.c): per event, the worst latency
//! of each second it happened in, for the last 160 such seconds, and the
//! all-time worst; LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR read
//! it.
//!
//! A sample is added only when `latency-monitor-threshold` (milliseconds)
//! is non-zero and the latency reaches it (`latencyAddSampleIfNeeded`).
//! keylock records the events Redis records that exist here: `command`
//! and `fast-command` for every executed command (`State::book_run`),
//! and `expire-cycle` for the active expiry cycle (`Engine::cron`). It
//! has no fork, AOF, RDB, eviction or defrag, so their events never
//! appear. Events are listed in the order they first happened (Redis
//! lists them in its hash table's order, which varies from run to run).
//! Sample times are Unix seconds of the engine's clock, as the slow
//! log's.

use crate::reply::Reply;

/// Redis's `LATENCY_TS_LEN`.
const TS_LEN: usize = 160;
/// Redis's `LATENCY_GRAPH_COLS`.
const GRAPH_COLS: usize = 80;

#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    /// Unix seconds; 0 is an unused slot.
    time: i64,
    latency_ms: u64,
}

#[derive(Debug)]
struct TimeSeries {
    /// The slot of the next sample.
    idx: usize,
    max: u64,
    samples: [Sample; TS_LEN],
}

impl TimeSeries {
    /// The samples, oldest first.
    fn in_order(&self) -> impl Iterator<Item = &Sample> {
        (0..TS_LEN)
            .map(move |j| &self.samples[(self.idx + j) % TS_LEN])
            .filter(|s| s.time != 0)
    }
}

#[derive(Debug, Default)]
pub struct LatencyMonitor {
    events: Vec<(String, Box<TimeSeries>)>,
}

/// What LATENCY DOCTOR reads beside the samples.
pub struct DoctorContext {
    pub threshold_ms: i64,
    pub slowlog_log_slower_than: i64,
    pub hz: u32,
    pub now_secs: i64,
}

impl LatencyMonitor {
    /// `latencyAddSample`: the sample joins its second's, keeping the
    /// worse of the two.
    pub fn add_sample(&mut self, event: &str, latency_ms: u64, now_secs: i64) {
        let at = match self.events.iter().position(|(name, _)| name == event) {
            Some(at) => at,
            None => {
                self.events.push((
                    event.to_string(),
                    Box::new(TimeSeries {
                        idx: 0,
                        max: 0,
                        samples: [Sample::default(); TS_LEN],
                    }),
                ));
                self.events.len() - 1
            }
        };
        let ts = &mut self.events[at].1;
        ts.max = ts.max.max(latency_ms);
        let prev = (ts.idx + TS_LEN - 1) % TS_LEN;
        if ts.samples[prev].time == now_secs {
            ts.samples[prev].latency_ms = ts.samples[prev].latency_ms.max(latency_ms);
            return;
        }
        ts.samples[ts.idx] = Sample {
            time: now_secs,
            latency_ms,
        };
        ts.idx = (ts.idx + 1) % TS_LEN;
    }

    /// LATENCY RESET: forgets one event (any case), or all; how many went.
    pub fn reset(&mut self, event: Option<&[u8]>) -> usize {
        let before = self.events.len();
        match event {
            None => self.events.clear(),
            Some(e) => self.events.retain(|(name, _)| !name.as_bytes().eq_ignore_ascii_case(e)),
        }
        before - self.events.len()
    }

    fn find(&self, event: &[u8]) -> Option<&(String, Box<TimeSeries>)> {
        self.events.iter().find(|(name, _)| name.as_bytes() == event)
    }

    /// LATENCY LATEST: per event, its last sample and all-time worst.
    pub fn latest(&self) -> Reply {
        Reply::Array(
            self.events
                .iter()
                .map(|(name, ts)| {
                    let last = &ts.samples[(ts.idx + TS_LEN - 1) % TS_LEN];
                    Reply::Array(vec![
                        Reply::Bulk(name.clone().into()),
                        Reply::Int(last.time),
                        Reply::Int(last.latency_ms as i64),
                        Reply::Int(ts.max as i64),
                    ])
                })
                .collect(),
        )
    }

    /// LATENCY HISTORY: an event's samples, oldest first.
    pub fn history(&self, event: &[u8]) -> Reply {
        let Some((_, ts)) = self.find(event) else {
            return Reply::Array(Vec::new());
        };
        Reply::Array(
            ts.in_order()
                .map(|s| Reply::Array(vec![Reply::Int(s.time), Reply::Int(s.latency_ms as i64)]))
                .collect(),
        )
    }

    /// LATENCY GRAPH (`latencyCommandGenSparkeline`): None when the event
    /// has no samples.
    pub fn graph(&self, event: &[u8], now_secs: i64) -> Option<String> {
        let (name, ts) = self.find(event)?;
        let mut seq = Sparkline::default();
        let (mut min, mut max) = (0, 0);
        for s in ts.in_order() {
            if seq.samples.is_empty() {
                (min, max) = (s.latency_ms, s.latency_ms);
            } else {
                max = max.max(s.latency_ms);
                min = min.min(s.latency_ms);
            }
            let elapsed = now_secs - s.time;
            let label = if elapsed < 60 {
                format!("{elapsed}s")
            } else if elapsed < 3600 {
                format!("{}m", elapsed / 60)
            } else if elapsed < 3600 * 24 {
                format!("{}h", elapsed / 3600)
            } else {
                format!("{}d", elapsed / (3600 * 24))
            };
            seq.add(s.latency_ms as f64, label);
        }
        let mut graph = format!("{name} - high {max} ms, low {min} ms (all time high {} ms)\n", ts.max);
        graph.push_str(&"-".repeat(GRAPH_COLS));
        graph.push('\n');
        seq.render(&mut graph, GRAPH_COLS, 4);
        Some(graph)
    }

    /// LATENCY DOCTOR (`createLatencyReport`), for the events keylock can
    /// record and the advice Redis gives for them.
    pub fn doctor(&self, cx: &DoctorContext) -> String {
        let mut report = String::new();
        if self.events.is_empty() && cx.threshold_ms == 0 {
            report.push_str("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n");
            return report;
        }
        let mut advices = 0;
        let (mut slowlog_enabled, mut slowlog_tuning, mut slowlog_inspect) = (false, false, false);
        let (mut scheduler, mut hz, mut large_objects, mut thp) = (false, false, false, false);
        for (eventnum, (event, ts)) in self.events.iter().enumerate() {
            let eventnum = eventnum + 1;
            if eventnum == 1 {
                report.push_str(
                    "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n",
                );
            }
            let stats = analyze(ts, cx.now_secs);
            report.push_str(&format!(
                "{}. {}: {} latency spikes (average {}ms, mean deviation {}ms, period {:.2} sec). Worst all time event {}ms.",
                eventnum,
                event,
                stats.samples,
                stats.avg,
                stats.mad,
                stats.period as f64 / stats.samples as f64,
                ts.max
            ));
            if event.eq_ignore_ascii_case("command") {
                if cx.slowlog_log_slower_than < 0 {
                    slowlog_enabled = true;
                    advices += 1;
                } else if cx.slowlog_log_slower_than / 1000 > cx.threshold_ms {
                    slowlog_tuning = true;
                    advices += 1;
                }
                slowlog_inspect = true;
                large_objects = true;
                advices += 2;
            }
            if event.eq_ignore_ascii_case("fast-command") {
                scheduler = true;
                advices += 1;
            }
            if event.eq_ignore_ascii_case("expire-cycle") {
                hz = true;
                large_objects = true;
                advices += 2;
            }
            report.push('\n');
        }
        if anon_huge_pages_bytes() > 0 {
            thp = true;
            advices += 1;
        }
        if self.events.is_empty() && advices == 0 {
            report.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        } else if !self.events.is_empty() && advices == 0 {
            report.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
        } else {
            report.push_str("\nI have a few advices for you:\n\n");
            let suggested = (cx.threshold_ms as u64).wrapping_mul(1000);
            if slowlog_enabled {
                report.push_str(&format!("- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {suggested}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.\n"));
            }
            if slowlog_tuning {
                report.push_str(&format!("- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {suggested}'.\n"));
            }
            if slowlog_inspect {
                report.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
            }
            if scheduler {
                report.push_str(concat!(
                    "- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n",
                    "  1) Lower the system load.\n",
                    "  2) Use a computer / VM just for Redis if you are running other software in the same system.\n",
                    "  3) Check if you have a \"noisy neighbour\" problem.\n",
                    "  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n",
                    "  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n"
                ));
            }
            if hz && cx.hz < 100 {
                report.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
            }
            if large_objects {
                report.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
            }
            if thp {
                report.push_str("- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n");
            }
        }
        report
    }
}

/// `struct latencyStats` as `analyzeLatencyForEvent` fills it.
struct Stats {
    avg: u64,
    mad: u64,
    samples: u64,
    period: i64,
}

fn analyze(ts: &TimeSeries, now_secs: i64) -> Stats {
    let mut stats = Stats {
        avg: 0,
        mad: 0,
        samples: 0,
        period: 0,
    };
    let mut sum = 0u64;
    for s in ts.samples.iter().filter(|s| s.time != 0) {
        stats.samples += 1;
        sum += s.latency_ms;
        if stats.period == 0 || s.time < stats.period {
            stats.period = s.time;
        }
    }
    if let Some(avg) = sum.checked_div(stats.samples) {
        stats.avg = avg;
        stats.period = now_secs - stats.period;
        if stats.period == 0 {
            stats.period = 1;
        }
        let deviations: u64 = ts
            .samples
            .iter()
            .filter(|s| s.time != 0)
            .map(|s| (stats.avg as i64 - s.latency_ms as i64).unsigned_abs())
            .sum();
        stats.mad = deviations / stats.samples;
    }
    stats
}

/// The process's AnonHugePages from /proc/self/smaps, in bytes (Redis's
/// `THPGetAnonHugePagesSize`); 0 where there is no such file.
fn anon_huge_pages_bytes() -> u64 {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    smaps
        .lines()
        .filter_map(|l| l.strip_prefix("AnonHugePages:"))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .sum::<u64>()
        * 1024
}

/// Redis's sparkline.c, as LATENCY GRAPH draws with it (filled, linear).
#[derive(Default)]
struct Sparkline {
    samples: Vec<(f64, String)>,
    min: f64,
    max: f64,
}

const CHARSET_FILL: &[u8; 3] = b"_o#";
const LABEL_MARGIN_TOP: i64 = 1;

impl Sparkline {
    fn add(&mut self, value: f64, label: String) {
        if self.samples.is_empty() {
            (self.min, self.max) = (value, value);
        } else if value < self.min {
            self.min = value;
        } else if value > self.max {
            self.max = value;
        }
        self.samples.push((value, label));
    }

    fn render(&self, out: &mut String, columns: usize, rows: i64) {
        let mut j = 0;
        while j < self.samples.len() {
            let len = (self.samples.len() - j).min(columns);
            if j != 0 {
                out.push('\n');
            }
            self.render_range(out, rows, j, len);
            j += columns;
        }
    }

    fn render_range(&self, out: &mut String, rows: i64, offset: usize, len: usize) {
        let mut relmax = self.max - self.min;
        if relmax == 0.0 {
            relmax = 1.0;
        }
        let charset_len = CHARSET_FILL.len() as i64;
        let steps = charset_len * rows;
        let labels = !self.samples.is_empty();
        let mut row = 0i64;
        loop {
            let mut more = false;
            let mut chars = vec![b' '; len];
            for (j, slot) in chars.iter_mut().enumerate() {
                let (value, label) = &self.samples[j + offset];
                let relval = value - self.min;
                // C: `step = (int) (relval*steps)/relmax;`
                let step = (((relval * steps as f64) as i32) as f64 / relmax) as i64;
                let step = step.clamp(0, steps - 1);
                if row < rows {
                    let charidx = step - (rows - row - 1) * charset_len;
                    more = true;
                    if (0..charset_len).contains(&charidx) {
                        *slot = CHARSET_FILL[charidx as usize];
                    } else if charidx >= charset_len {
                        *slot = b'|';
                    }
                } else {
                    if labels && row - rows < LABEL_MARGIN_TOP {
                        more = true;
                        break;
                    }
                    let label_char = row - rows - LABEL_MARGIN_TOP;
                    if (label.len() as i64) > label_char {
                        more = true;
                        *slot = label.as_bytes()[label_char as usize];
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.push_str(&String::from_utf8_lossy(&chars));
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_of_one_second_keep_the_worst() {
        let mut m = LatencyMonitor::default();
        m.add_sample("command", 5, 100);
        m.add_sample("command", 9, 100);
        m.add_sample("command", 3, 100);
        m.add_sample("command", 4, 101);
        let Reply::Array(history) = m.history(b"command") else { panic!() };
        assert_eq!(history.len(), 2);
        assert_eq!(history[0], Reply::Array(vec![Reply::Int(100), Reply::Int(9)]));
    }

    #[test]
    fn reset_names_events_in_any_case() {
        let mut m = LatencyMonitor::default();
        m.add_sample("command", 5, 100);
        m.add_sample("fast-command", 5, 100);
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert_eq!(m.reset(None), 1);
    }

    #[test]
    fn graph_draws_as_redis_draws() {
        let mut m = LatencyMonitor::default();
        m.add_sample("command", 300, 1000);
        m.add_sample("command", 400, 1001);
        m.add_sample("command", 500, 1002);
        let graph = m.graph(b"command", 1003).expect("samples");
        let expected = format!(
            "command - high 500 ms, low 300 ms (all time high 500 ms)\n{}\n  #\n _|\n ||\n_||\n   \n321\nsss\n",
            "-".repeat(80)
        );
        assert_eq!(graph, expected);
    }
}
