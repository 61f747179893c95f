//! `embed_migrations!` cannot tell Cargo that it read the migrations
//! directories, so a build after a migration was added or edited (and no
//! Rust file) would ship the old list. Cargo scans a directory named here
//! for any change, and then rebuilds this crate.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
