fn main() -> std::process::ExitCode {
    cudalint::cli::main()
}
