//! Helpers shared by the hardware integration tests.

/// Whether a tool is there; without it the test says SKIP in one line, unless CI=true.
pub fn have(tool: &str) -> bool {
    if mase_hw::simulate::tool_available(tool) {
        return true;
    }
    assert!(std::env::var("CI").map_or(true, |v| v != "true"), "{tool} is not installed and CI=true");
    eprintln!("SKIP: {tool} is not installed");
    false
}
