namespace {
constexpr std::size_t kBatch = 10000;
constexpr int kOnlyHere = 1;
}  // namespace
