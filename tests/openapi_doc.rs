//! The checked-in OpenAPI document must equal what the code generates.

use std::path::PathBuf;

#[test]
fn checked_in_document_is_current() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../openapi/openapi.json");
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = market_data_server::openapi::document_json();
    assert!(
        checked_in == generated,
        "openapi/openapi.json is out of date with the code.\nRegenerate it from the repository root with:\n    cargo run -q -- openapi > openapi/openapi.json"
    );
}

#[test]
fn every_operation_has_an_id_tag_summary_and_security() {
    let doc: serde_json::Value =
        serde_json::from_str(&market_data_server::openapi::document_json()).unwrap();
    let mut ids = std::collections::HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            assert!(ids.insert(id.to_owned()), "duplicate operationId {id}");
            assert!(
                op["tags"].as_array().is_some_and(|t| !t.is_empty()),
                "{id} has no tag"
            );
            assert!(op["summary"].is_string(), "{id} has no summary");
            assert!(
                op["description"].as_str().is_some_and(|d| d.len() > 20),
                "{id} has no description"
            );
            if path.starts_with("/v1/") || path.starts_with("/api/developer/v1/") {
                assert_eq!(
                    op["security"][0]["apiKey"],
                    serde_json::json!([]),
                    "{id} lacks the apiKey requirement"
                );
                assert!(
                    op["responses"]["401"].is_object(),
                    "{id} does not document 401"
                );
            }
        }
    }
    assert_eq!(
        ids.len(),
        14 * 2 + 2,
        "14 operations under two prefixes, plus healthz and readyz"
    );
}
