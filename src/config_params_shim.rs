//! Temporary stand-in for the parameter table while it is being written.
use crate::error::CmdError;
use std::collections::BTreeMap;
#[derive(Default)]
pub struct ConfigParams {
    values: BTreeMap<String, String>,
}
impl ConfigParams {
    pub fn new() -> ConfigParams {
        let mut c = ConfigParams::default();
        for (k, v) in [
            ("requirepass", ""),
            ("timeout", "0"),
            ("proto-max-bulk-len", "536870912"),
            ("appendonly", "no"),
            ("save", ""),
            ("maxmemory", "0"),
            ("databases", "16"),
        ] {
            c.values.insert(k.into(), v.into());
        }
        c
    }
    pub fn get(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        self.values
            .iter()
            .filter(|(k, _)| patterns.iter().any(|p| crate::glob::matches(p, k.as_bytes(), true)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
    pub fn set(&mut self, pairs: &[(&[u8], &[u8])]) -> Result<Vec<&'static str>, CmdError> {
        for (k, v) in pairs {
            self.values
                .insert(String::from_utf8_lossy(k).into(), String::from_utf8_lossy(v).into());
        }
        Ok(vec![])
    }
    pub fn apply_directive(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        self.values.insert(name.into(), args.join(" "));
        Ok(())
    }
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }
    pub fn int(&self, name: &str) -> Option<i64> {
        self.value(name)?.parse().ok()
    }
    pub fn set_default(&mut self, name: &str, value: &str) {
        self.values.insert(name.into(), value.into());
    }
}
