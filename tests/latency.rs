//! LATENCY over TCP: the monitor records what runs longer than
//! `latency-monitor-threshold` (`command`, `fast-command`,
//! `expire-cycle`), and every command's runs land in its histogram
//! (LATENCY HISTOGRAM, INFO latencystats). Texts and error replies are
//! compared with redis-server in `corpus/latency.txt`.

mod common;
use common::*;

fn debug_enabled() -> ServerHandle {
    start_with(|c| c.directives.push(("enable-debug-command".into(), vec!["yes".into()])))
}

#[test]
fn a_slow_command_is_a_command_event_once_a_threshold_is_set() {
    let s = debug_enabled();
    let mut c = conn(&s);
    q::<()>(&mut c, &["DEBUG", "SLEEP", "0.05"]);
    let latest: Vec<(String, i64, i64, i64)> = q(&mut c, &["LATENCY", "LATEST"]);
    assert!(latest.is_empty(), "the monitor is off by default: {latest:?}");
    q::<()>(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "20"]);
    q::<()>(&mut c, &["DEBUG", "SLEEP", "0.05"]);
    let latest: Vec<(String, i64, i64, i64)> = q(&mut c, &["LATENCY", "LATEST"]);
    assert_eq!(latest.len(), 1, "{latest:?}");
    let (event, _, latency, max) = &latest[0];
    assert_eq!(event, "command");
    assert!(*latency >= 50 && *latency < 1000 && max == latency, "{latest:?}");
    let history: Vec<(i64, i64)> = q(&mut c, &["LATENCY", "HISTORY", "command"]);
    assert_eq!(history.len(), 1);
}

#[test]
fn samples_of_the_same_second_keep_the_worst() {
    let s = debug_enabled();
    let mut c = conn(&s);
    q::<()>(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "10"]);
    q::<()>(&mut c, &["DEBUG", "SLEEP", "0.04"]);
    q::<()>(&mut c, &["DEBUG", "SLEEP", "0.015"]);
    let history: Vec<(i64, i64)> = q(&mut c, &["LATENCY", "HISTORY", "command"]);
    // Two samples unless a second boundary fell between the two sleeps.
    assert!(history.iter().any(|&(_, ms)| ms >= 40), "{history:?}");
    let latest: Vec<(String, i64, i64, i64)> = q(&mut c, &["LATENCY", "LATEST"]);
    assert!(latest[0].3 >= 40);
}

#[test]
fn graph_heads_its_sparkline_with_high_low_and_all_time_high() {
    let s = debug_enabled();
    let mut c = conn(&s);
    q::<()>(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "10"]);
    q::<()>(&mut c, &["DEBUG", "SLEEP", "0.02"]);
    let graph: String = q(&mut c, &["LATENCY", "GRAPH", "command"]);
    let lines: Vec<&str> = graph.lines().collect();
    assert!(lines[0].starts_with("command - high ") && lines[0].ends_with(" ms)"), "{graph}");
    assert_eq!(lines[1], "-".repeat(80));
    // One sample is drawn at the bottom row, then its age below a margin.
    assert_eq!(&lines[2..], &[" ", " ", " ", "_", " ", "0", "s"], "{graph}");
}

#[test]
fn reset_forgets_the_events_it_names() {
    let s = debug_enabled();
    let mut c = conn(&s);
    q::<()>(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "10"]);
    q::<()>(&mut c, &["DEBUG", "SLEEP", "0.02"]);
    assert_eq!(q::<i64>(&mut c, &["LATENCY", "RESET", "nope"]), 0);
    assert_eq!(q::<i64>(&mut c, &["LATENCY", "RESET", "COMMAND", "command"]), 1);
    let latest: Vec<redis::Value> = q(&mut c, &["LATENCY", "LATEST"]);
    assert!(latest.is_empty());
}

#[test]
fn doctor_reports_each_event_and_its_advice() {
    let s = debug_enabled();
    let mut c = conn(&s);
    q::<()>(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "10"]);
    q::<()>(&mut c, &["DEBUG", "SLEEP", "0.02"]);
    let report: String = q(&mut c, &["LATENCY", "DOCTOR"]);
    assert!(report.contains("1. command: 1 latency spikes (average "), "{report}");
    assert!(report.contains("- Check your Slow Log"), "{report}");
}

#[test]
fn expiring_a_large_key_is_an_expire_cycle_event() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]);
    q::<()>(
        &mut c,
        &[
            "EVAL",
            "for i = 1, 300000 do redis.call('sadd', KEYS[1], 'member:' .. i) end",
            "1",
            "big",
        ],
    );
    q::<()>(&mut c, &["PEXPIRE", "big", "10"]);
    wait_until(5, "the key expired", || q::<i64>(&mut c, &["DBSIZE"]) == 0);
    let latest: Vec<(String, i64, i64, i64)> = q(&mut c, &["LATENCY", "LATEST"]);
    assert!(latest.iter().any(|(e, ..)| e == "expire-cycle"), "{latest:?}");
}

#[test]
fn histograms_count_each_command_and_subcommand_since_resetstat() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    q::<()>(&mut c, &["SET", "a", "b"]);
    q::<()>(&mut c, &["SET", "c", "d"]);
    q::<()>(&mut c, &["CLIENT", "ID"]);
    let all: Vec<redis::Value> = q(&mut c, &["LATENCY", "HISTOGRAM"]);
    let mut names: Vec<String> = all
        .chunks(2)
        .map(|p| redis::from_redis_value(p[0].clone()).expect("name"))
        .collect();
    names.sort();
    assert_eq!(names, ["client|id", "config|resetstat", "set"]);
    let set: Vec<redis::Value> = q(&mut c, &["LATENCY", "HISTOGRAM", "set"]);
    let detail: Vec<redis::Value> = redis::from_redis_value(set[1].clone()).expect("map");
    assert_eq!(redis::from_redis_value::<String>(detail[0].clone()).unwrap(), "calls");
    assert_eq!(redis::from_redis_value::<i64>(detail[1].clone()).unwrap(), 2);
    let points: Vec<i64> = redis::from_redis_value(detail[3].clone()).expect("points");
    assert_eq!(points.last(), Some(&2), "cumulative counts end at the calls: {points:?}");
    let client: Vec<redis::Value> = q(&mut c, &["LATENCY", "HISTOGRAM", "client"]);
    assert_eq!(redis::from_redis_value::<String>(client[0].clone()).unwrap(), "client|id");
}

#[test]
fn info_latencystats_lists_the_configured_percentiles() {
    let s = start();
    let mut c = conn(&s);
    q::<()>(&mut c, &["CONFIG", "SET", "latency-tracking-info-percentiles", "50 99.9 100"]);
    q::<()>(&mut c, &["CONFIG", "RESETSTAT"]);
    q::<()>(&mut c, &["PING"]);
    let info: String = q(&mut c, &["INFO", "latencystats"]);
    let line = info.lines().find(|l| l.starts_with("latency_percentiles_usec_ping:")).expect(&info);
    let names: Vec<&str> = line
        .split_once(':')
        .unwrap()
        .1
        .split(',')
        .map(|p| p.split_once('=').unwrap().0)
        .collect();
    assert_eq!(names, ["p50", "p99.9", "p100"]);
    q::<()>(&mut c, &["CONFIG", "SET", "latency-tracking", "no"]);
    let info: String = q(&mut c, &["INFO", "latencystats"]);
    assert_eq!(info.trim_end(), "# Latencystats");
}
