//! What the in-process benches share: an engine with one connected client
//! (id 1), with native scripts on or off, driven without sockets.

use keylock::Config;
use keylock::engine::{Engine, Outbox, State};

/// An engine with client 1 connected; `native` sets `native-scripts`.
pub fn engine(native: bool) -> Engine {
    let mut config = Config::ephemeral();
    config
        .directives
        .push(("native-scripts".into(), vec![if native { "yes" } else { "no" }.into()]));
    let mut engine = Engine::new(State::new(config, 0));
    let addr = "127.0.0.1:1".parse().expect("address");
    engine.connect(1, addr, addr, Outbox::new());
    engine
}
