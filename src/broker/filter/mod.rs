//! Message filtering: tags and SQL92.
