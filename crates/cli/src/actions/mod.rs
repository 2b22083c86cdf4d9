pub mod info;
pub mod test;
pub mod train;
