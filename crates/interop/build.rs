//! Generates the ONNX protobuf types from the vendored `proto/onnx.proto3` with `protox` (a pure-Rust
//! protobuf compiler), so building needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/onnx.proto3");
    let fds = protox::compile(["onnx.proto3"], ["proto"])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
