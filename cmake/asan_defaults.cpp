// Compiled into every fragscope target of a sanitizer build (FRAGSCOPE_SANITIZE), never into a
// release: ASan's defaults for our binaries, so that tests, the CLI they start and a developer's
// own runs behave alike. ASAN_OPTIONS set by the user still overrides these.
//
// intercept_tls_get_addr=0: GCC 12's sanitizer runtime takes a dynamic TLS block whose address is
// 16 past a page boundary for a pre-2.25 glibc header and reads the two words before it as a range
// to scan; LeakSanitizer's tracer then dies on it at exit ("Tracer caught signal 11", no leak
// reported), at random (google/sanitizers#1322). Without the interceptor LeakSanitizer still scans
// static TLS and every stack and heap block; only dynamically loaded libraries' TLS goes unscanned.
extern "C" __attribute__((visibility("default"), used)) const char* __asan_default_options()
{
    return "intercept_tls_get_addr=0";
}
