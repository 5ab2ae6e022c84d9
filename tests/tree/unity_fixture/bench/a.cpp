namespace {
constexpr int kBatch = 500;  // tasks per submit
}  // namespace
