pub mod analyze;
pub mod export;
pub mod info;
pub mod search;
pub mod study;
pub mod test;
pub mod train;
pub mod transform;
