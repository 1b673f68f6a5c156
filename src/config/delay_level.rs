//! RocketMQ's `messageDelayLevel` setting: space-separated durations such as `1s 5s 1m 2h`.

use super::error::ConfigError;
use super::sections::Config;

impl Config {
    /// Parsed delay levels in milliseconds (RocketMQ messageDelayLevel: `1s 5s 1m 2h`).
    pub fn delay_levels_ms(&self) -> Result<Vec<u64>, ConfigError> {
        parse_delay_levels(&self.broker.message_delay_level).map_err(|reason| ConfigError {
            var: "RINGMQ_BROKER_MESSAGE_DELAY_LEVEL".into(),
            value: self.broker.message_delay_level.clone(),
            reason,
            at: None,
        })
    }
}

fn parse_delay_levels(text: &str) -> Result<Vec<u64>, String> {
    let mut levels = Vec::new();
    for token in text.split_whitespace() {
        let split = token.len().saturating_sub(1);
        let (number, unit) = token.split_at(split);
        let factor_ms = match unit {
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(format!("level `{token}` must end with s, m, h or d")),
        };
        let n: u64 = number
            .parse()
            .map_err(|_| format!("level `{token}` is not a number"))?;
        levels.push(n * factor_ms);
    }
    if levels.is_empty() {
        return Err("at least one level is needed".into());
    }
    Ok(levels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_levels_parse_like_rocketmq() {
        let c = Config::default();
        let levels = c.delay_levels_ms().unwrap();
        assert_eq!(levels.len(), 18);
        assert_eq!(levels[0], 1_000);
        assert_eq!(levels[4], 60_000);
        assert_eq!(levels[17], 7_200_000);
        assert!(parse_delay_levels("1x").is_err());
        assert!(parse_delay_levels("").is_err());
    }
}
