use clap::Parser;

fn main() {
    let cli = shardlog::cli::Cli::parse();
    std::process::exit(shardlog::cli::run(cli));
}
