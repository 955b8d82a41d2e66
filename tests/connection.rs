//! Connection commands over TCP.

mod common;
use common::*;

#[test]
fn ping_replies_pong() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    assert_eq!(q::<String>(&mut c, &["PING", "hi"]), "hi");
}

#[test]
fn ping_with_two_arguments_is_an_arity_error() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(
        q_err(&mut c, &["PING", "a", "b"]),
        "ERR wrong number of arguments for 'ping' command"
    );
}

#[test]
fn unknown_command_error_lists_arguments() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(
        raw.call(&["FOO", "a", "b"]),
        b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"
    );
}

#[test]
fn hello_3_switches_to_resp3_maps() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    let reply = raw.call(&["HELLO", "3"]);
    assert!(
        reply.starts_with(b"%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    assert_eq!(raw.call(&["GET", "missing"]), b"_\r\n");
}

#[test]
fn select_out_of_range_is_refused() {
    let s = start();
    let mut c = conn(&s);
    assert_eq!(q_err(&mut c, &["SELECT", "16"]), "ERR DB index is out of range");
    assert_eq!(q::<String>(&mut c, &["SELECT", "15"]), "OK");
}

#[test]
fn quit_replies_ok_then_closes() {
    let s = start();
    let mut raw = Raw::connect(s.addr());
    assert_eq!(raw.call(&["QUIT"]), b"+OK\r\n");
    assert!(raw.is_closed());
}

/// A field of CLIENT INFO's line.
fn client_info_field(c: &mut redis::Connection, name: &str) -> u64 {
    let info: String = q(c, &["CLIENT", "INFO"]);
    let prefix = format!("{name}=");
    info.split(' ')
        .find_map(|kv| kv.strip_prefix(prefix.as_str())?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {info}"))
}

#[test]
fn client_age_and_idle_count_whole_seconds_of_the_clock_as_redis() {
    // Redis subtracts whole seconds of its clock (`server.unixtime`): a
    // client seen at 9.999 s is idle 1 second at 10.000 s.
    let s = start_with(|c| c.clock = keylock::Clock::manual(1_700_000_009_999));
    let mut c = conn(&s);
    let mut other = conn(&s);
    let _: String = q(&mut c, &["PING"]);
    s.clock().advance(1);
    let list: String = q(&mut other, &["CLIENT", "LIST"]);
    let line = list.lines().find(|l| !l.contains("cmd=client|list")).unwrap();
    assert!(line.contains(" age=1 idle=1 "), "{line}");
    s.clock().advance(999);
    assert_eq!(client_info_field(&mut c, "age"), 1);
    assert_eq!(client_info_field(&mut c, "idle"), 0);
}

#[test]
fn a_killed_client_sees_its_connection_end_before_the_killer_gets_its_reply() {
    // Redis closes the killed connection inside CLIENT KILL, so whoever
    // sent it (a test, a master dropping its replicas in a transaction)
    // can count on the peer having seen the end.
    let s = start();
    for round in 0..20 {
        let mut victim = Raw::connect(s.addr());
        let id = text(victim.call(&["CLIENT", "ID"]));
        let id = id.trim().trim_start_matches(':');
        let mut killer = Raw::connect(s.addr());
        assert_eq!(killer.call(&["CLIENT", "KILL", "ID", id]), b":1\r\n");
        let socket = victim.reader.get_ref();
        socket.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        let read = std::io::Read::read(&mut &*socket, &mut byte);
        assert!(matches!(read, Ok(0)), "round {round}: {read:?}");
    }
}
