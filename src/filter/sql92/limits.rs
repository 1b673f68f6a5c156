//! Bounds on what the SQL92 compiler accepts. Java has none; ours keep hostile input from
//! overflowing the stack or taking unbounded time.

/// Longest accepted expression text. Java has no limit; ours bounds compile time and the
/// compiled tree's memory. 64 KiB leaves room for long `IN` lists (thousands of keys) while a
/// subscription that long is already far outside normal use.
pub const EXPRESSION_LENGTH_MAX_BYTES: usize = 64 * 1024;

/// Deepest nesting of parentheses and prefix operators (`(`, `NOT`, `-`, `+`). Bounds the
/// parser's recursion (each level is a handful of stack frames). Hand-written filters rarely
/// nest beyond a few levels.
pub const NESTING_DEPTH_MAX: usize = 64;

/// Deepest compiled tree. Chains such as `a = b = c` or `a CONTAINS 'x' CONTAINS 'y'` grow the
/// tree without nesting, so this is bounded separately; it bounds the evaluator's recursion
/// (see the stack test in `tests.rs`). `AND`/`OR` chains are flattened and do not add depth. Each
/// parenthesis level holds at most a logical node and a comparison, hence twice the nesting
/// limit plus room for the leaves.
pub const TREE_DEPTH_MAX: usize = 2 * NESTING_DEPTH_MAX + 8;
