//! (to be written)
#[cfg(test)]
pub(crate) mod test_fifo;
