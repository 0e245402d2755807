use clap::Parser;

/// Huge blocks reserved lazily: see `server::alloc`.
#[global_allocator]
static ALLOCATOR: shardlog::server::alloc::LazyHugeAlloc = shardlog::server::alloc::LazyHugeAlloc;

fn main() {
    let cli = shardlog::cli::Cli::parse();
    std::process::exit(shardlog::cli::run(cli));
}
