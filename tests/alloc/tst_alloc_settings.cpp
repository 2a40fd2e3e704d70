// Known answers for today's PyTorch allocator settings (docs/whatif.md "Settings"): the keys
// c10/core/AllocatorConfig.cpp and c10/cuda/CUDAAllocatorConfig.cpp parse, with their units and
// checks, the environment variables' precedence, and the rules of CUDACachingAllocator.cpp that
// the newer settings change (max_non_split_rounding_mb, per_process_memory_fraction,
// expandable_segments_reserve, MemPool's no_split and use_on_oom). Each test names the PyTorch
// function it follows. Addresses are offsets from the device's base (SimpleDevice places
// segments first-fit from it).
#include "core/alloc/caching_allocator.h"

#include <QTest>

#include <cstring>
#include <map>

using namespace fs::alloc;

namespace {
constexpr uint64_t MiB = 1024 * 1024;
constexpr uint64_t GiB = 1024 * MiB;
constexpr uint64_t B = 0x10000000;

// A fake environment for effectiveEnvConf.
std::map<std::string, std::string> g_env;
const char* fakeGet(const char* name)
{
    auto it = g_env.find(name);
    return it == g_env.end() ? nullptr : it->second.c_str();
}
} // namespace

class TstAllocSettings : public QObject
{
    Q_OBJECT
private slots:
    // CUDAAllocatorConfig::parseArgs and AcceleratorAllocatorConfig::parseArgs: every key of
    // today's PyTorch, with its unit.
    void parsesEveryKey()
    {
        const Config c = Config::parse(
            "max_non_split_rounding_mb:64,per_process_memory_fraction:0.5,"
            "expandable_segments_reserve:40G,"
            "expandable_segments_reserve_by_class:[tiny:0.05,big:2G],"
            "graph_capture_record_stream_reuse:True,throw_on_cudamalloc_oom:True,"
            "pinned_num_register_threads:8,pinned_use_cuda_host_register:True,"
            "pinned_reserve_segment_size_mb:16,pinned_use_background_threads:True,"
            "pinned_free_catch_all:True,release_lock_on_cudamalloc:True,backend:cudaMallocAsync");
        // parseMaxNonSplitRoundingSize: MiB -> bytes: 64 x 2^20.
        QCOMPARE(c.maxNonSplitRounding, 64 * MiB);
        // parsePerProcessMemoryFraction: a plain fraction.
        QCOMPARE(c.memoryFraction, 0.5);
        // parseReserveSpec: "40G" is absolute GiB: resolveBytes = 40 x 2^30 whatever the device.
        QVERIFY(c.reserveSet);
        QVERIFY(!c.reserve.isFraction);
        QCOMPARE(c.reserve.bytes(80 * GiB), 40 * GiB);
        // parseExpandableSegmentsReserveByClass: two classes; tiny = 0.05 x 80 GiB = 4 GiB.
        QCOMPARE(c.reserveByClass.size(), size_t{2});
        QCOMPARE(c.reserveByClass.at("tiny").bytes(80 * GiB), 4 * GiB);
        QCOMPARE(c.reserveByClass.at("big").bytes(80 * GiB), 2 * GiB);
        QCOMPARE(c.backend, std::string("cudaMallocAsync"));
        QVERIFY(c.graphCaptureRecordStreamReuse);
        QVERIFY(c.throwOnCudaMallocOom);
        // Six keys with no effect on device memory: five pinned_*, release_lock_on_cudamalloc.
        QCOMPARE(c.noDeviceEffect.size(), size_t{6});
        QCOMPARE(c.noDeviceEffect.at("pinned_num_register_threads"), std::string("8"));
        // Named, never dropped: backend, graph reuse, throw, 2 classes, 6 no-effect keys = 11.
        const auto u = c.unmodelled();
        QCOMPARE(u.size(), size_t{11});
        QCOMPARE(u[0].setting, std::string("backend:cudaMallocAsync"));
        QVERIFY(u[0].reason.find("cudaMallocAsync") != std::string::npos);
        QCOMPARE(u[1].setting, std::string("graph_capture_record_stream_reuse:True"));
        QCOMPARE(u[2].setting, std::string("throw_on_cudamalloc_oom:True"));
        QCOMPARE(u[3].setting, std::string("expandable_segments_reserve_by_class:[big:2G]"));
        // describe() is canonical text parse() reads back to the same settings.
        QCOMPARE(Config::parse(c.describe()), c);
        // Defaults: nothing to name, nothing to describe.
        QVERIFY(Config{}.unmodelled().empty());
        QCOMPARE(Config::parse("backend:native").describe(), std::string());
    }

    // The checks of the parse* functions, each with the value just past its limit.
    void checks()
    {
        // parseMaxSplitSize / parseMaxNonSplitRoundingSize: at least kLargeBuffer / 1 MiB = 20.
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 Config::parse("max_non_split_rounding_mb:19"));
        QCOMPARE(Config::parse("max_non_split_rounding_mb:20").maxNonSplitRounding, 20 * MiB);
        // parsePerProcessMemoryFraction: [0, 1], both ends allowed.
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 Config::parse("per_process_memory_fraction:1.5"));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 Config::parse("per_process_memory_fraction:-0.1"));
        QCOMPARE(Config::parse("per_process_memory_fraction:0").memoryFraction, 0.0);
        QCOMPARE(Config::parse("per_process_memory_fraction:1").memoryFraction, 1.0);
        // parseAllocatorConfig: native or cudaMallocAsync only.
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, Config::parse("backend:async"));
        // parsePinnedNumRegisterThreads: a power of 2, at most pinned_max_register_threads = 128.
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 Config::parse("pinned_num_register_threads:3"));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 Config::parse("pinned_num_register_threads:256"));
        QCOMPARE(Config::parse("pinned_num_register_threads:128").noDeviceEffect.size(), size_t{1});
        // parsePinnedReserveSegmentSize: > 0.
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 Config::parse("pinned_reserve_segment_size_mb:0"));
        // parseReserveSpec: a bad value is not fatal, PyTorch warns and keeps its default; the
        // model keeps it as an unmodelled setting so that it is named.
        const Config bad = Config::parse("expandable_segments_reserve:-1");
        QVERIFY(!bad.reserveSet);
        QCOMPARE(bad.unmodelled().size(), size_t{1});
        QCOMPARE(bad.unmodelled()[0].setting, std::string("expandable_segments_reserve:-1"));
        // A fraction: 0.5 x 80 GiB = 40 GiB.
        const Config half = Config::parse("expandable_segments_reserve:0.5");
        QVERIFY(half.reserve.isFraction);
        QCOMPARE(half.reserve.bytes(80 * GiB), 40 * GiB);
        // The by-class list needs its brackets.
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 Config::parse("expandable_segments_reserve_by_class:tiny"));
    }

    // AcceleratorAllocatorConfig::instance / CUDAAllocatorConfig::instance (today's PyTorch):
    // PYTORCH_CUDA_ALLOC_CONF first, then PYTORCH_ALLOC_CONF; the first set is taken whole.
    void environmentPrecedence()
    {
        g_env = {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64"},
                 {"PYTORCH_ALLOC_CONF", "expandable_segments:True"}};
        EnvConf e = effectiveEnvConf(fakeGet);
        QCOMPARE(e.name, std::string("PYTORCH_CUDA_ALLOC_CONF"));
        QCOMPARE(e.text, std::string("max_split_size_mb:64"));
        QCOMPARE(e.ignored, std::string("PYTORCH_ALLOC_CONF"));
        g_env = {{"PYTORCH_ALLOC_CONF", "expandable_segments:True"}};
        e = effectiveEnvConf(fakeGet);
        QCOMPARE(e.name, std::string("PYTORCH_ALLOC_CONF"));
        QCOMPARE(e.ignored, std::string());
        // Set but empty still counts as set (get_env has a value): nothing is read from the
        // other name.
        g_env = {{"PYTORCH_CUDA_ALLOC_CONF", ""}, {"PYTORCH_ALLOC_CONF", "backend:native"}};
        e = effectiveEnvConf(fakeGet);
        QCOMPARE(e.name, std::string("PYTORCH_CUDA_ALLOC_CONF"));
        QCOMPARE(e.text, std::string());
        g_env.clear();
        QCOMPARE(effectiveEnvConf(fakeGet).name, std::string());
    }

    // get_free_block: a request at or above max_split_size takes a cached block only when the
    // block is less than max_non_split_rounding_size larger (kLargeBuffer, 20 MiB, by default).
    void maxNonSplitRounding()
    {
        for (const bool wider : {false, true}) {
            SimpleDevice dev(4 * GiB, B);
            CachingAllocator a(Config::parse(wider ? "max_split_size_mb:32,"
                                                     "max_non_split_rounding_mb:40"
                                                   : "max_split_size_mb:32"),
                               dev);
            a.free(a.malloc(100 * MiB, 0)); // one 100 MiB segment, cached
            Block* b = a.malloc(70 * MiB, 0);
            QVERIFY(b);
            if (wider) {
                // 100 < 70 + 40 = 110: the cached block is taken whole (70 MiB >= max_split_size:
                // should_split says no), no new cudaMalloc.
                QCOMPARE(b->addr, B);
                QCOMPARE(b->size, 100 * MiB);
                QCOMPARE(a.counters().cudaMallocs, int64_t{1});
            } else {
                // 100 >= 70 + 20 = 90: too much larger; a new 70 MiB segment after the first.
                QCOMPARE(b->addr, B + 100 * MiB);
                QCOMPARE(b->size, 70 * MiB);
                QCOMPARE(a.counters().cudaMallocs, int64_t{2});
            }
            QCOMPARE(a.checkConsistency(), std::string());
        }
    }

    // setMemoryFraction / alloc_block: with per_process_memory_fraction < 1, a cudaMalloc that
    // would take reserved bytes past fraction x device memory fails (allowed_memory_maximum).
    void perProcessMemoryFraction()
    {
        {
            // 0.5 x 100 MiB = 50 MiB. 40 MiB fits; 40 + 20 = 60 > 50: free-and-retry finds
            // nothing to release (the 40 MiB block is live), so OOM.
            SimpleDevice dev(100 * MiB, B);
            OomListener l;
            CachingAllocator a(Config::parse("per_process_memory_fraction:0.5"), dev, &l);
            QCOMPARE(a.processLimit(), 50 * MiB);
            QVERIFY(a.malloc(40 * MiB, 0));
            QVERIFY(!a.malloc(20 * MiB, 0));
            QCOMPARE(a.counters().ooms, int64_t{1});
            QCOMPARE(l.ooms, 1);
        }
        {
            // No fraction: the device's 100 MiB is the only bound; 40 + 20 = 60 <= 100.
            SimpleDevice dev(100 * MiB, B);
            CachingAllocator a(Config{}, dev);
            QCOMPARE(a.processLimit(), uint64_t{0});
            QVERIFY(a.malloc(40 * MiB, 0));
            QVERIFY(a.malloc(20 * MiB, 0));
        }
        {
            // A device of unknown size (no capacity): nothing to take the fraction of.
            SimpleDevice dev(kNoLimit, B);
            CachingAllocator a(Config::parse("per_process_memory_fraction:0.5"), dev);
            QCOMPARE(a.processLimit(), uint64_t{0});
        }
    }

    // ExpandableSegment / clamp_reserve_bytes: expandable_segments_reserve replaces the 9/8
    // reservation (capped at it); a request larger than one segment cannot be served.
    void expandableSegmentsReserve()
    {
        {
            // Default: 1 GiB x 9/8 = 1152 MiB, rounded up to 20 MiB pages = 1160 MiB.
            SimpleDevice dev(1 * GiB, B);
            CachingAllocator a(Config::parse("expandable_segments:True"), dev);
            QVERIFY(a.malloc(200 * MiB, 0));
            QCOMPARE(a.segments().front()->size, 1160 * MiB);
        }
        {
            // 0.25 x 1 GiB = 256 MiB -> 13 pages of 20 MiB = 260 MiB. 200 MiB fits in it;
            // 300 MiB > 260 MiB cannot (one allocation never spans two segments): OOM.
            SimpleDevice dev(1 * GiB, B);
            CachingAllocator a(Config::parse("expandable_segments:True,"
                                             "expandable_segments_reserve:0.25"),
                               dev);
            QVERIFY(a.malloc(200 * MiB, 0));
            QCOMPARE(a.segments().front()->size, 260 * MiB);
            QVERIFY(!a.malloc(300 * MiB, 1));
            QCOMPARE(a.counters().ooms, int64_t{1});
            QCOMPARE(a.checkConsistency(), std::string());
        }
        {
            // 40G on a 1 GiB device: capped at the 9/8 reservation, 1160 MiB.
            SimpleDevice dev(1 * GiB, B);
            CachingAllocator a(Config::parse("expandable_segments:True,"
                                             "expandable_segments_reserve:40G"),
                               dev);
            QVERIFY(a.malloc(200 * MiB, 0));
            QCOMPARE(a.segments().front()->size, 1160 * MiB);
        }
    }

    // should_split with no_split_pools (MemPool(no_split=True), setNoSplit): a block of that
    // pool is never split, the request takes it whole.
    void memPoolNoSplit()
    {
        for (const bool noSplit : {false, true}) {
            SimpleDevice dev(1 * GiB, B);
            CachingAllocator a(Config{}, dev);
            a.setPoolOptions(1, noSplit, false);
            a.free(a.malloc(30 * MiB, 0, 1)); // a 30 MiB segment cached in pool 1
            Block* b = a.malloc(4 * MiB, 0, 1);
            QVERIFY(b);
            QCOMPARE(b->addr, B);
            // Split: 4 MiB taken, 26 MiB > 1 MiB stays free. No split: all 30 MiB taken.
            QCOMPARE(b->size, noSplit ? 30 * MiB : 4 * MiB);
            QCOMPARE(a.counters().cudaMallocs, int64_t{1});
            QCOMPARE(a.checkConsistency(), std::string());
        }
    }

    // malloc: "we are about to oom, try to use existing mempools as a last resort"
    // (use_on_oom_pools): a default-pool request takes a fitting cached block of a
    // MemPool(use_on_oom=True), best fit on its stream.
    void memPoolUseOnOom()
    {
        for (const bool useOnOom : {false, true}) {
            // 64 MiB device. Pool 1 caches a 40 MiB segment; a default-pool 30 MiB request
            // needs a new segment: 40 + 30 = 70 > 64 fails; free-and-retry releases only the
            // default pools (pool 1 is still in use); without use_on_oom: OOM. With it: pool 1's
            // 40 MiB block serves it, split (30 MiB < max_split_size, 10 MiB > 1 MiB remains).
            SimpleDevice dev(64 * MiB, B);
            CachingAllocator a(Config{}, dev);
            a.setPoolOptions(1, false, useOnOom);
            a.free(a.malloc(40 * MiB, 0, 1));
            // The same request on stream 1: pool 1's block is stream 0's (get_free_block looks
            // in the request's stream only): OOM either way.
            QVERIFY(!a.malloc(30 * MiB, 1, 0));
            QCOMPARE(a.counters().ooms, int64_t{1});
            Block* b = a.malloc(30 * MiB, 0, 0);
            if (useOnOom) {
                QVERIFY(b);
                QCOMPARE(b->addr, B);
                QCOMPARE(b->size, 30 * MiB);
                QCOMPARE(b->segment->poolId, 1);
                QCOMPARE(a.counters().ooms, int64_t{1});
                QCOMPARE(a.counters().reserved, 40 * MiB);
            } else {
                QVERIFY(!b);
                QCOMPARE(a.counters().ooms, int64_t{2});
            }
            QCOMPARE(a.checkConsistency(), std::string());
        }
    }

    // The snapshot's settings text (last_allocator_settings, under "PYTORCH_CUDA_ALLOC_CONF")
    // gives the keys torch's dict does not carry; the dict wins for those it does.
    void snapshotSettingsText()
    {
        const Config s = Config::fromSnapshotSettings(
            R"({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64,per_process_memory_fraction:0.8,)"
            R"(max_non_split_rounding_mb:32", "max_split_size": 134217728, )"
            R"("expandable_segments": false})");
        QCOMPARE(s.maxSplitSize, 128 * MiB); // the dict's 134217728 B, not the text's 64 MiB
        QCOMPARE(s.memoryFraction, 0.8);
        QCOMPARE(s.maxNonSplitRounding, 32 * MiB);
    }

private:
    struct OomListener : Listener
    {
        int ooms = 0;
        void oom(uint64_t, uint32_t, uint64_t) override { ++ooms; }
    };
};

QTEST_GUILESS_MAIN(TstAllocSettings)
#include "tst_alloc_settings.moc"
