//! Why a topic name or a topic config is refused, as types. Each knows its
//! Kafka error code; its text is the error message the client is sent.

use std::fmt;

use crate::protocol::errors::{self, ErrorCode};

/// A name Kafka would refuse (INVALID_TOPIC_EXCEPTION).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicNameError {
    Length(usize),
    Dots,
    IllegalChar(char),
}

impl fmt::Display for TopicNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Length(n) => write!(f, "topic name must have 1 to 249 characters, not {n}"),
            Self::Dots => f.write_str("topic name cannot be '.' or '..'"),
            Self::IllegalChar(c) => write!(f, "topic name contains illegal character {c:?}"),
        }
    }
}

impl std::error::Error for TopicNameError {}

/// A topic config (or a change to one) that cannot be applied
/// (INVALID_CONFIG). Every case names the config.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    Unknown {
        name: String,
    },
    /// The value does not parse as the config's type.
    WrongType {
        name: String,
        value: String,
        kind: super::topic_configs::ConfigType,
    },
    /// The value is not one of the config's choices.
    NotAllowed {
        name: String,
        value: String,
        allowed: &'static [&'static str],
    },
    NotInteger {
        name: String,
        value: String,
    },
    NotPositive {
        name: String,
        value: i64,
    },
    CleanupPolicy {
        value: String,
    },
    /// Append or subtract (IncrementalAlterConfigs 2, 3) on a config that
    /// is not a list.
    NotAList {
        name: String,
    },
    NeedsValue {
        name: String,
    },
    UnknownOperation {
        name: String,
        operation: i8,
    },
}

impl ConfigError {
    pub fn code(&self) -> ErrorCode {
        errors::INVALID_CONFIG
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown { name } => write!(f, "unknown topic config {name:?}"),
            Self::WrongType { name, value, kind } => write!(f, "config {name}={value:?} is not a valid {kind:?}"),
            Self::NotAllowed { name, value, allowed } => {
                write!(f, "config {name}={value:?}: allowed values are {}", allowed.join(", "))
            }
            Self::NotInteger { name, value } => write!(f, "config {name}={value:?} is not an integer"),
            Self::NotPositive { name, value } => write!(f, "config {name} must be positive, got {value}"),
            Self::CleanupPolicy { value } => write!(f, "cleanup.policy must be delete or compact, not {value:?}"),
            Self::NotAList { name } => {
                write!(f, "config {name} is not a list: it cannot be appended to or subtracted from")
            }
            Self::NeedsValue { name } => write!(f, "config {name}: append and subtract need a value"),
            Self::UnknownOperation { name, operation } => write!(f, "config {name}: unknown operation {operation}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A topic change the controller refuses: the code and message one topic's
/// result carries back to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

impl From<TopicNameError> for Refusal {
    fn from(e: TopicNameError) -> Self {
        Self::new(errors::INVALID_TOPIC_EXCEPTION, e.to_string())
    }
}

impl From<ConfigError> for Refusal {
    fn from(e: ConfigError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}
