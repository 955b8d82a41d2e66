//! Redis 7.0.15's command tips (COMMAND INFO's eighth field, COMMAND
//! DOCS has none): hints for cluster clients about how a command's reply
//! varies and where to send it. Copied from Redis's `src/commands/*.json`,
//! for every command that has any, including ones keylock does not serve
//! yet; a command not listed has none.

/// Tips by full command name (`container|subcommand` for subcommands),
/// sorted by name.
const TIPS: &[(&str, &[&str])] = &[
    ("client|info", &["nondeterministic_output"]),
    ("client|list", &["nondeterministic_output"]),
    ("cluster|bumpepoch", &["nondeterministic_output"]),
    ("cluster|count-failure-reports", &["nondeterministic_output"]),
    ("cluster|getkeysinslot", &["nondeterministic_output"]),
    ("cluster|info", &["nondeterministic_output"]),
    ("cluster|links", &["nondeterministic_output"]),
    ("cluster|nodes", &["nondeterministic_output"]),
    ("cluster|replicas", &["nondeterministic_output"]),
    ("cluster|shards", &["nondeterministic_output"]),
    ("cluster|slaves", &["nondeterministic_output"]),
    ("cluster|slots", &["nondeterministic_output"]),
    ("command", &["nondeterministic_output_order"]),
    ("command|docs", &["nondeterministic_output_order"]),
    ("command|info", &["nondeterministic_output_order"]),
    ("command|list", &["nondeterministic_output_order"]),
    ("config|set", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("dbsize", &["request_policy:all_shards", "response_policy:agg_sum"]),
    ("del", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("dump", &["nondeterministic_output"]),
    ("exists", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("flushall", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("flushdb", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|delete", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|flush", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|kill", &["request_policy:all_shards", "response_policy:one_succeeded"]),
    ("function|list", &["nondeterministic_output_order"]),
    ("function|load", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|restore", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    (
        "function|stats",
        &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"],
    ),
    ("hgetall", &["nondeterministic_output_order"]),
    ("hkeys", &["nondeterministic_output_order"]),
    ("hrandfield", &["nondeterministic_output"]),
    ("hscan", &["nondeterministic_output"]),
    ("hvals", &["nondeterministic_output_order"]),
    (
        "info",
        &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"],
    ),
    ("keys", &["request_policy:all_shards", "nondeterministic_output_order"]),
    ("lastsave", &["nondeterministic_output"]),
    (
        "latency|doctor",
        &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"],
    ),
    (
        "latency|graph",
        &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"],
    ),
    (
        "latency|histogram",
        &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"],
    ),
    (
        "latency|history",
        &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"],
    ),
    (
        "latency|latest",
        &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"],
    ),
    ("latency|reset", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    (
        "memory|doctor",
        &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"],
    ),
    (
        "memory|malloc-stats",
        &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"],
    ),
    ("memory|purge", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    (
        "memory|stats",
        &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"],
    ),
    ("mget", &["request_policy:multi_shard"]),
    ("migrate", &["nondeterministic_output"]),
    ("module|list", &["nondeterministic_output_order"]),
    ("mset", &["request_policy:multi_shard", "response_policy:all_succeeded"]),
    ("msetnx", &["request_policy:multi_shard", "response_policy:agg_min"]),
    ("object|encoding", &["nondeterministic_output"]),
    ("object|freq", &["nondeterministic_output"]),
    ("object|idletime", &["nondeterministic_output"]),
    ("object|refcount", &["nondeterministic_output"]),
    ("ping", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("pttl", &["nondeterministic_output"]),
    ("randomkey", &["request_policy:all_shards", "nondeterministic_output"]),
    ("scan", &["nondeterministic_output", "request_policy:special"]),
    ("script|exists", &["request_policy:all_shards", "response_policy:agg_logical_and"]),
    ("script|flush", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("script|kill", &["request_policy:all_shards", "response_policy:one_succeeded"]),
    ("script|load", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("sdiff", &["nondeterministic_output_order"]),
    ("sinter", &["nondeterministic_output_order"]),
    ("slowlog|get", &["request_policy:all_nodes", "nondeterministic_output"]),
    (
        "slowlog|len",
        &["request_policy:all_nodes", "response_policy:agg_sum", "nondeterministic_output"],
    ),
    ("slowlog|reset", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("smembers", &["nondeterministic_output_order"]),
    ("spop", &["nondeterministic_output"]),
    ("srandmember", &["nondeterministic_output"]),
    ("sscan", &["nondeterministic_output"]),
    ("sunion", &["nondeterministic_output_order"]),
    ("time", &["nondeterministic_output"]),
    ("touch", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("ttl", &["nondeterministic_output"]),
    ("unlink", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("wait", &["request_policy:all_shards", "response_policy:agg_min"]),
    ("xadd", &["nondeterministic_output"]),
    ("xautoclaim", &["nondeterministic_output"]),
    ("xclaim", &["nondeterministic_output"]),
    ("xinfo|consumers", &["nondeterministic_output"]),
    ("xpending", &["nondeterministic_output"]),
    ("xtrim", &["nondeterministic_output"]),
    ("zrandmember", &["nondeterministic_output"]),
    ("zscan", &["nondeterministic_output"]),
];

/// The tips of the command named `full_name`, in Redis's order.
pub fn of(full_name: &str) -> &'static [&'static str] {
    TIPS.binary_search_by(|(name, _)| (*name).cmp(full_name)).map_or(&[], |i| TIPS[i].1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_is_sorted_for_binary_search() {
        assert!(super::TIPS.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
