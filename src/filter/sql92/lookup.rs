//! Where the evaluator reads message properties from.

use std::borrow::Cow;
use std::collections::HashMap;

/// Read access to a message's properties by exact name.
pub trait PropertyLookup {
    /// The value of property `name`, or `None` when the message does not have it.
    fn get(&self, name: &str) -> Option<Cow<'_, str>>;
}

impl PropertyLookup for HashMap<String, String> {
    fn get(&self, name: &str) -> Option<Cow<'_, str>> {
        HashMap::get(self, name).map(|value| Cow::Borrowed(value.as_str()))
    }
}
