//! The RocketMQ remoting protocol: pure codec, no I/O.
