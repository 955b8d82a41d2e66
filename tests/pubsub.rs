//! Pub/sub over real connections: delivery, patterns, shard channels,
//! RESP2 subscribed mode and RESP3 pushes.

mod common;
use common::*;

use std::time::Duration;

#[test]
fn subscribe_confirms_each_channel_with_a_running_count() {
    let s = start();
    let mut sub = Raw::connect(s.addr());
    sub.send(b"SUBSCRIBE ch1 ch2\r\n");
    assert_eq!(sub.reply(), b"*3\r\n$9\r\nsubscribe\r\n$3\r\nch1\r\n:1\r\n");
    assert_eq!(sub.reply(), b"*3\r\n$9\r\nsubscribe\r\n$3\r\nch2\r\n:2\r\n");
}

#[test]
fn publish_reaches_channel_and_pattern_subscribers() {
    let s = start();
    let mut sub = Raw::connect(s.addr());
    sub.call(&["SUBSCRIBE", "redisson_lock__channel:{lock}"]);
    sub.call(&["PSUBSCRIBE", "redisson_lock__channel:*"]);
    let mut publisher = Raw::connect(s.addr());
    assert_eq!(publisher.call(&["PUBLISH", "redisson_lock__channel:{lock}", "0"]), b":2\r\n");
    assert_eq!(
        sub.reply(),
        b"*3\r\n$7\r\nmessage\r\n$29\r\nredisson_lock__channel:{lock}\r\n$1\r\n0\r\n"
    );
    assert_eq!(
        sub.reply(),
        b"*4\r\n$8\r\npmessage\r\n$24\r\nredisson_lock__channel:*\r\n$29\r\nredisson_lock__channel:{lock}\r\n$1\r\n0\r\n"
    );
}

#[test]
fn publish_without_subscribers_returns_zero() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "nobody", "x"]), 0);
}

#[test]
fn subscribed_resp2_connection_answers_ping_as_pubsub_array() {
    let s = start();
    let mut sub = Raw::connect(s.addr());
    sub.call(&["SUBSCRIBE", "ch"]);
    assert_eq!(sub.call(&["PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    assert_eq!(sub.call(&["PING", "x"]), b"*2\r\n$4\r\npong\r\n$1\r\nx\r\n");
}

#[test]
fn subscribed_resp2_connection_refuses_other_commands() {
    let s = start();
    let mut sub = Raw::connect(s.addr());
    sub.call(&["SUBSCRIBE", "ch"]);
    assert_eq!(
        sub.call(&["GET", "k"]),
        b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n".to_vec()
    );
}

#[test]
fn resp3_subscriber_gets_pushes_and_may_run_commands() {
    let s = start();
    let mut sub = Raw::connect(s.addr());
    sub.call(&["HELLO", "3"]);
    assert_eq!(sub.call(&["SUBSCRIBE", "x"]), b">3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n");
    assert_eq!(sub.call(&["GET", "k"]), b"_\r\n");
    assert_eq!(sub.call(&["PING"]), b"+PONG\r\n");
    let mut publisher = Raw::connect(s.addr());
    publisher.call(&["PUBLISH", "x", "y"]);
    assert_eq!(sub.reply(), b">3\r\n$7\r\nmessage\r\n$1\r\nx\r\n$1\r\ny\r\n");
}

#[test]
fn unsubscribe_all_when_subscribed_to_nothing_replies_nil_channel() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    assert_eq!(c.call(&["UNSUBSCRIBE"]), b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
    assert_eq!(c.call(&["PUNSUBSCRIBE"]), b"*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n");
}

#[test]
fn unsubscribing_the_last_channel_leaves_subscribed_mode() {
    let s = start();
    let mut c = Raw::connect(s.addr());
    c.call(&["SUBSCRIBE", "a"]);
    assert_eq!(c.call(&["UNSUBSCRIBE", "a"]), b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n");
    assert_eq!(c.call(&["SET", "k", "v"]), b"+OK\r\n");
}

#[test]
fn sharded_channels_deliver_smessage() {
    let s = start();
    let mut sub = Raw::connect(s.addr());
    assert_eq!(
        sub.call(&["SSUBSCRIBE", "{a}s"]),
        b"*3\r\n$10\r\nssubscribe\r\n$4\r\n{a}s\r\n:1\r\n"
    );
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["SPUBLISH", "{a}s", "hi"]), 1);
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "{a}s", "hi"]), 0);
    assert_eq!(sub.reply(), b"*3\r\n$8\r\nsmessage\r\n$4\r\n{a}s\r\n$2\r\nhi\r\n");
}

#[test]
fn pubsub_introspection_counts_subscribers() {
    let s = start();
    let mut sub = Raw::connect(s.addr());
    sub.call(&["SUBSCRIBE", "news"]);
    sub.call(&["PSUBSCRIBE", "n*"]);
    let mut c = conn(&s);
    assert_eq!(q::<Vec<String>>(&mut c, &["PUBSUB", "CHANNELS"]), vec!["news"]);
    assert_eq!(q::<Vec<redis::Value>>(&mut c, &["PUBSUB", "NUMSUB", "news", "none"]).len(), 4);
    assert_eq!(q::<i64>(&mut c, &["PUBSUB", "NUMPAT"]), 1);
}

#[test]
fn a_disconnected_subscriber_is_forgotten() {
    let s = start();
    {
        let mut sub = Raw::connect(s.addr());
        sub.call(&["SUBSCRIBE", "gone"]);
    }
    let mut c = conn(&s);
    for _ in 0..100 {
        if q::<i64>(&mut c, &["PUBLISH", "gone", "x"]) == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("subscriber still counted after disconnect");
}

#[test]
fn redis_crate_pubsub_receives_messages() {
    let s = start();
    let client = redis::Client::open(s.url()).unwrap();
    let mut sub_conn = client.get_connection().unwrap();
    let mut pubsub = sub_conn.as_pubsub();
    pubsub.subscribe("events").unwrap();
    pubsub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut c = conn(&s);
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "events", "payload"]), 1);
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_channel_name(), "events");
    assert_eq!(msg.get_payload::<String>().unwrap(), "payload");
}
