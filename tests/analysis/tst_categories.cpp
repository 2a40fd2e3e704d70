// Memory by category (core/analysis/categories.h) and the comparison by call site
// (compare.h compareCallSites): the pattern matcher, the default rules' order, a user rule
// overriding a default, a session with nothing to go by, the report's line at the peak, the
// settings file's "categories", and the CLI's JSON (state --by category, compare --by
// callsite). Known answers on hand-built sessions, worked out in the comments.
#include "builder.h"
#include "testutil.h"

#include "core/analysis/compare.h"
#include "core/analysis/engine.h"
#include "core/analysis/explore.h"
#include "core/analysis/report.h"
#include "core/settings/settings.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <fmt/format.h>

using namespace fs;
using namespace fs::analysis;
using namespace antest;

namespace {

StackId stack(Ingest& in, const std::vector<std::string>& frames)
{
    std::vector<StringId> ids;
    for (const auto& f : frames)
        ids.push_back(in.intern(f));
    return in.internStack(ids);
}

void alloc(Ingest& in, int64_t t, uint64_t offKiB, uint64_t sizeKiB, StackId st = {},
           const std::string& userMetadata = {})
{
    Event e = ev(EventType::Alloc, t, kBase + offKiB * KiB, sizeKiB * KiB);
    e.aux = st.value;
    if (!userMetadata.empty()) e.aux2 = in.intern(userMetadata).value;
    in.add(e);
}

const char* kModule = "/venv/lib/python3.10/site-packages/torch/nn/modules/module.py";

// One 1 MiB segment at t=0 (offsets KiB); at t=100 live:
//   P [0, 64)     t=10  _apply in nn/modules/module.py            -> parameters       64
//   G [64, 96)    t=20  backward (torch/_tensor.py)                -> gradients        32
//   O [96, 224)   t=30  torch/optim/adam.py                        -> optimizer_state 128
//   A [224, 480)  t=40  forward (model.py:20) under _call_impl     -> activations     256
//   R [592, 600)  t=55  no stack, inside the range "Forward pass" (50..60) -> activations 8
//   K [480, 576)  t=65  forward (model.py:30), user_metadata "past_key_values layer 3"
//                       (the KV rule comes before "forward")      -> kv_cache         96
//   W [576, 592)  t=70  at::cuda::getCUDABlasLtWorkspace, in forward -> workspace      16
//   X [600, 604)  t=75  no stack                                   -> other             4
//   D 4 KiB outside any region at t=80, no stack                  -> other             4
// F [700, 764) t=5 with P's stack is freed at 8: not live. Totals at 100: parameters 64,
// gradients 32, optimizer 128, activations 264, kv 96, workspace 16, other 8: 608 KiB =
// allocated 604 KiB inside the segment + 4 KiB outside. The allocated peak inside regions is
// first reached at t=75 (X, the last in-region block; D is outside): 604 KiB, other 4 KiB.
void writeKinds(const std::string& path)
{
    Ingest in(options(path));
    in.begin();
    in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
    const StackId sp =
        stack(in, {fmt::format("_apply ({}:900)", kModule), fmt::format("to ({}:1340)", kModule),
                   "main (/home/u/train.py:3)"});
    const StackId sg =
        stack(in, {"backward (/venv/lib/python3.10/site-packages/torch/_tensor.py:520)",
                   "main (/home/u/train.py:9)"});
    const StackId so = stack(
        in, {"_single_tensor_adam (/venv/lib/python3.10/site-packages/torch/optim/adam.py:400)",
             "main (/home/u/train.py:11)"});
    const StackId sa =
        stack(in, {"forward (/home/u/model.py:20)", fmt::format("_call_impl ({}:1500)", kModule),
                   "main (/home/u/train.py:7)"});
    const StackId sk = stack(in, {"forward (/home/u/model.py:30)", "main (/home/u/train.py:7)"});
    const StackId sw = stack(in, {"at::cuda::getCUDABlasLtWorkspace()",
                                  "forward (/home/u/model.py:20)", "main (/home/u/train.py:7)"});
    alloc(in, 5, 700, 64, sp);
    in.add(ev(EventType::Free, 8, kBase + 700 * KiB));
    alloc(in, 10, 0, 64, sp);
    alloc(in, 20, 64, 32, sg);
    alloc(in, 30, 96, 128, so);
    alloc(in, 40, 224, 256, sa);
    Event range = ev(EventType::Range, 50);
    range.endTime = 60;
    range.name = in.intern("Forward pass");
    in.add(range);
    alloc(in, 55, 592, 8);
    alloc(in, 65, 480, 96, sk, "past_key_values layer 3");
    alloc(in, 70, 576, 16, sw);
    alloc(in, 75, 600, 4);
    in.add(ev(EventType::Alloc, 80, kBase + 2 * MiB, 4 * KiB));
    mark(in, 200, "done");
    in.end();
}

// Two blocks, nothing recorded about either.
void writeBare(const std::string& path)
{
    Ingest in(options(path));
    in.begin();
    in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
    alloc(in, 10, 0, 128);
    alloc(in, 20, 128, 64);
    mark(in, 100, "done");
    in.end();
}

const std::vector<std::string> kS1 = {"alloc_a (/home/u/proj/model.py:10)"};
const std::vector<std::string> kS2 = {"alloc_b (/home/u/proj/model.py:20)"};
const std::vector<std::string> kS3 = {"alloc_c (/home/u/proj/model.py:30)"};

// A: S1 [0, 64K) t=10, S2 [64K, 192K) t=20, S1 [192K, 448K) t=30 freed at 40; end mark at 100.
//    Peak 448 KiB at 30: S1 320 KiB, S2 128 KiB. End: S1 64, S2 128.
void writeCompareA(const std::string& path)
{
    Ingest in(options(path));
    in.begin();
    in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
    const StackId s1 = stack(in, kS1), s2 = stack(in, kS2);
    alloc(in, 10, 0, 64, s1);
    alloc(in, 20, 64, 128, s2);
    alloc(in, 30, 192, 256, s1);
    in.add(ev(EventType::Free, 40, kBase + 192 * KiB));
    mark(in, 100, "done");
    in.end();
}

// B: S1 [0, 32K) t=10, S2 [32K, 288K) t=20 freed at 50, S3 [288K, 304K) t=30; end mark at 100.
//    Peak 304 KiB at 30: S1 32, S2 256, S3 16. End: S1 32, S3 16.
void writeCompareB(const std::string& path)
{
    Ingest in(options(path));
    in.begin();
    in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
    const StackId s1 = stack(in, kS1), s2 = stack(in, kS2), s3 = stack(in, kS3);
    alloc(in, 10, 0, 32, s1);
    alloc(in, 20, 32, 256, s2);
    alloc(in, 30, 288, 16, s3);
    in.add(ev(EventType::Free, 50, kBase + 32 * KiB));
    mark(in, 100, "done");
    in.end();
}

uint64_t bytes(const CategoryBreakdown& b, MemoryCategory c)
{
    return b.bytesOf(c);
}

int64_t blocks(const CategoryBreakdown& b, MemoryCategory c)
{
    for (const CategoryRow& r : b.rows)
        if (r.category == c) return r.blocks;
    return -1;
}

} // namespace

class TstCategories : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    std::string kinds_, bare_, a_, b_;

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        kinds_ = dir_.filePath("kinds.fragscope").toStdString();
        bare_ = dir_.filePath("bare.fragscope").toStdString();
        a_ = dir_.filePath("a.fragscope").toStdString();
        b_ = dir_.filePath("b.fragscope").toStdString();
        writeKinds(kinds_);
        writeBare(bare_);
        writeCompareA(a_);
        writeCompareB(b_);
    }

    void patterns()
    {
        // Case-insensitive, anywhere in a line; '*' any run within one line, never across.
        QVERIFY(categoryPatternMatches("Workspace", "at::cuda::getCUDABlasLtWORKSPACE()"));
        QVERIFY(categoryPatternMatches("_apply (*nn/modules/module.py",
                                       "f\n_apply (/v/torch/nn/modules/module.py:900)"));
        QVERIFY(!categoryPatternMatches("_apply (*nn/modules/module.py",
                                        "_apply (/v/x.py:1)\nnn/modules/module.py"));
        QVERIFY(!categoryPatternMatches("", "anything"));
        // A Windows path: a backslash reads as '/'.
        QVERIFY(
            categoryPatternMatches("torch/optim/", "step (C:\\py\\Lib\\torch\\optim\\adam.py:9)"));
        QVERIFY(!categoryPatternMatches("**", "anything"));
        MemoryCategory c{};
        QVERIFY(parseMemoryCategory("KV-Cache", c));
        QCOMPARE(c, MemoryCategory::KvCache);
        QVERIFY(parseMemoryCategory("optimizer state", c));
        QCOMPARE(c, MemoryCategory::OptimizerState);
        QVERIFY(!parseMemoryCategory("weights", c));
        // The defaults' order: workspace before forward, KV before forward, nothing -> other.
        QCOMPARE(categorise("getCUDABlasLtWorkspace\nforward (m.py:1)", {}),
                 MemoryCategory::Workspace);
        QCOMPARE(categorise("forward (m.py:1)\npast_key_values", {}), MemoryCategory::KvCache);
        QCOMPARE(categorise("forward (m.py:1)", {}), MemoryCategory::Activations);
        QCOMPARE(categorise("main (train.py:1)", {}), MemoryCategory::Other);
        // A user rule comes first.
        QCOMPARE(categorise("forward (m.py:1)", {{"m.py:1", MemoryCategory::Parameters}}),
                 MemoryCategory::Parameters);
    }

    void eachKindByHand()
    {
        const auto e = Engine::open(kinds_);
        const Explorer x(e);
        const CategoryBreakdown b = x.categories(0, Level::Framework, 100);
        QCOMPARE(bytes(b, MemoryCategory::Parameters), 64 * KiB);
        QCOMPARE(bytes(b, MemoryCategory::Gradients), 32 * KiB);
        QCOMPARE(bytes(b, MemoryCategory::OptimizerState), 128 * KiB);
        QCOMPARE(bytes(b, MemoryCategory::Activations), 264 * KiB);
        QCOMPARE(blocks(b, MemoryCategory::Activations), int64_t{2});
        QCOMPARE(bytes(b, MemoryCategory::KvCache), 96 * KiB);
        QCOMPARE(bytes(b, MemoryCategory::Workspace), 16 * KiB);
        QCOMPARE(bytes(b, MemoryCategory::Other), 8 * KiB);
        QCOMPARE(blocks(b, MemoryCategory::Other), int64_t{2});
        QCOMPARE(b.rows.size(), size_t(kMemoryCategoryCount));
        QCOMPARE(b.rows.front().category, MemoryCategory::Activations); // largest first
        QCOMPARE(b.totalBytes, 608 * KiB);
        QCOMPARE(b.blocks, int64_t{9});
        QVERIFY(b.stacksRecorded);
        const State s = e->stateAt(0, Level::Framework, 100);
        QCOMPARE(b.totalBytes, s.allocatedBytes + s.allocatedOutsideBytes);
        QCOMPARE(s.allocatedBytes, 604 * KiB);
    }

    void userRuleOverridesDefault()
    {
        // "getCUDABlasLtWorkspace -> activations" before the default workspace rule: W's 16 KiB
        // move to activations (264 + 16 = 280), workspace holds nothing.
        const auto e = Engine::open(kinds_);
        const CategoryBreakdown b =
            categoriesAt(*e, 0, Level::Framework, 100,
                         {{"getCUDABlasLtWorkspace", MemoryCategory::Activations}});
        QCOMPARE(bytes(b, MemoryCategory::Activations), 280 * KiB);
        QCOMPARE(bytes(b, MemoryCategory::Workspace), uint64_t{0});
        QCOMPARE(b.totalBytes, 608 * KiB);
    }

    void nothingToGoBy()
    {
        // No stack, tag, note or range: all 192 KiB in two blocks are "other".
        const auto e = Engine::open(bare_);
        const CategoryBreakdown b = categoriesAt(*e, 0, Level::Framework, 50, {});
        QCOMPARE(bytes(b, MemoryCategory::Other), 192 * KiB);
        QCOMPARE(blocks(b, MemoryCategory::Other), int64_t{2});
        QCOMPARE(b.totalBytes, 192 * KiB);
        QVERIFY(!b.stacksRecorded);
        QCOMPARE(QString::fromStdString(categoryLine(b)), QString("other 192.00 KiB (100%)"));
    }

    void callSitesGroupedByCategory()
    {
        // The call-site table grouped by category over (0, 100]: held at 100 as eachKindByHand;
        // parameters made 2 allocations (F at 5 and P at 10, 128 KiB), F's free left no hole.
        const auto e = Engine::open(kinds_);
        const Explorer x(e);
        const CallSiteTable t = x.callSites(0, Level::Framework, 0, 100, GroupBy::Category);
        QCOMPARE(t.heldBytes, 608 * KiB);
        QCOMPARE(t.rows.front().label, std::string("activations"));
        QCOMPARE(t.rows.front().heldBytes, 264 * KiB);
        const auto params = std::find_if(t.rows.begin(), t.rows.end(), [](const CallSiteRow& r) {
            return r.label == "parameters";
        });
        QVERIFY(params != t.rows.end());
        QCOMPARE(params->heldBytes, 64 * KiB);
        QCOMPARE(params->allocations, int64_t{2});
        QCOMPARE(params->allocatedBytes, 128 * KiB);
        // A user rule reaches the grouping too: W's 16 KiB join activations (280 KiB).
        const CallSiteTable u =
            x.callSites(0, Level::Framework, 0, 100, GroupBy::Category, {},
                        {{"getCUDABlasLtWorkspace", MemoryCategory::Activations}});
        QCOMPARE(u.rows.front().heldBytes, 280 * KiB);
    }

    void heatmapColouredByCategory()
    {
        // Byte-time in view to the end (200), KiB x ns, blocks in the segment only: activations
        // 256x160 + 8x145 = 42120, optimizer 128x170 = 21760, kv 96x135 = 12960, parameters
        // 64x190 + 64x3 = 12352, gradients 32x180 = 5760, workspace 16x130 = 2080, other (X)
        // 4x125 = 500.
        const auto e = Engine::open(kinds_);
        const Explorer x(e);
        HeatmapRequest rq;
        rq.width = 50;
        rq.height = 64;
        HeatmapStyle style;
        style.colouring = Colouring::Category;
        const StyledRaster s = x.heatmap(rq, style);
        QCOMPARE(s.legend.size(), size_t(7));
        const std::vector<std::string> order = {"activations", "optimizer_state", "kv_cache",
                                                "parameters",  "gradients",       "workspace",
                                                "other"};
        for (size_t k = 0; k < order.size(); ++k)
            QCOMPARE(s.legend[k].label, order[k]);
        // A's cell (time 150, address 300K) is activations (0); O's (150, 150K) optimizer (1).
        auto cell = [&](int64_t t, uint64_t offKiB) {
            const int cx = int((t - s.raster.t0) * s.raster.width / (s.raster.t1 - s.raster.t0));
            const int cy = int(double(offKiB * KiB - s.raster.y0) /
                               double(s.raster.y1 - s.raster.y0) * s.raster.height);
            return s.category[size_t(cy) * size_t(s.raster.width) + size_t(cx)];
        };
        QCOMPARE(int(cell(150, 300)), 0);
        QCOMPARE(int(cell(150, 150)), 1);
    }

    void peakInReportAndParseTime()
    {
        // The in-region peak is first reached at 75 (604 KiB, D outside not yet).
        const auto e = Engine::open(kinds_);
        QCOMPARE(parseTime(*e, "peak"), int64_t{75});
        QCOMPARE(allocatedPeakTime(*e, 0, Level::Framework), int64_t{75});
        const Report r = buildReport(*e, "kinds");
        QVERIFY(r.peakCategories.has_value());
        QCOMPARE(r.peakCategories->time, int64_t{75});
        QCOMPARE(r.peakCategories->totalBytes, 604 * KiB);
        QCOMPARE(r.peakCategories->bytesOf(MemoryCategory::Other), 4 * KiB);
        // Nothing ever allocated: no peak.
        const std::string empty = dir_.filePath("empty.fragscope").toStdString();
        {
            Ingest in(options(empty));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
            mark(in, 10, "done");
            in.end();
        }
        const auto z = Engine::open(empty);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parseTime(*z, "peak"));
        QVERIFY(!buildReport(*z, "empty").peakCategories);
    }

    void settingsFile()
    {
        const QString p = dir_.filePath("settings.json");
        auto write = [&](const QByteArray& text) {
            QFile f(p);
            QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
            f.write(text);
        };
        write(R"({"categories": {"my_kv_pool": "kv_cache", "adapter*.py": "Parameters"}})");
        const settings::Settings s = settings::read(p.toStdString());
        QCOMPARE(s.categoryRules.size(), size_t(2));
        QCOMPARE(QString::fromStdString(s.categoryRules[0].pattern), QString("my_kv_pool"));
        QCOMPARE(s.categoryRules[0].category, MemoryCategory::KvCache);
        QCOMPARE(s.categoryRules[1].category, MemoryCategory::Parameters);
        QCOMPARE(s.reportOptions().categoryRules, s.categoryRules);
        // Written and read back unchanged.
        settings::write(s, p.toStdString());
        QCOMPARE(settings::read(p.toStdString()).categoryRules, s.categoryRules);
        // A bad category names the file and the key.
        write(R"({"categories": {"x": "weights"}})");
        try {
            settings::read(p.toStdString());
            QFAIL("expected an error");
        } catch (const SessionError& e) {
            const QString m = e.what();
            QVERIFY2(m.contains("settings.json") && m.contains("categories.x"), qPrintable(m));
        }
    }

    void compareByCallSite()
    {
        // Peak: S2 128 -> 256 (+128 KiB), S3 0 -> 16 (+16), S1 320 -> 32 (-288): that order.
        const CallSiteComparison c = compareCallSites(Engine::open(a_), Engine::open(b_));
        QCOMPARE(c.aTime, int64_t{30});
        QCOMPARE(c.bTime, int64_t{30});
        QCOMPARE(c.aBytes, 448 * KiB);
        QCOMPARE(c.bBytes, 304 * KiB);
        QVERIFY(c.stacksRecorded);
        QCOMPARE(c.rows.size(), size_t(3));
        QVERIFY(QString::fromStdString(c.rows[0].site).contains("model.py:20"));
        QCOMPARE(c.rows[0].aBytes, 128 * KiB);
        QCOMPARE(c.rows[0].bBytes, 256 * KiB);
        QCOMPARE(c.rows[0].deltaBytes, int64_t(128 * KiB));
        QVERIFY(QString::fromStdString(c.rows[1].site).contains("model.py:30"));
        QCOMPARE(c.rows[1].deltaBytes, int64_t(16 * KiB));
        QVERIFY(QString::fromStdString(c.rows[2].site).contains("model.py:10"));
        QCOMPARE(c.rows[2].aBytes, 320 * KiB);
        QCOMPARE(c.rows[2].deltaBytes, -int64_t(288 * KiB));
        // End (100): S3 +16, S1 64 -> 32 (-32), S2 128 -> 0 (-128).
        const CallSiteComparison e = compareCallSites(Engine::open(a_), Engine::open(b_), true);
        QCOMPARE(e.aTime, int64_t{100});
        QCOMPARE(e.rows.size(), size_t(3));
        QVERIFY(QString::fromStdString(e.rows[0].site).contains("model.py:30"));
        QCOMPARE(e.rows[1].deltaBytes, -int64_t(32 * KiB));
        QCOMPARE(e.rows[2].deltaBytes, -int64_t(128 * KiB));
        QCOMPARE(e.rows[2].bBytes, uint64_t{0});
    }

    void cliStateByCategoryJson()
    {
        const auto r = fstest::runCli({"state", QString::fromStdString(kinds_), "--at", "peak",
                                       "--by", "category", "--json"});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject o = fstest::cliJson(r);
        QCOMPARE(o["time_ns"].toInteger(), qint64(75));
        const QJsonObject s = o["states"].toArray()[0].toObject();
        const QJsonArray cats = s["categories"].toArray();
        QCOMPARE(cats.size(), kMemoryCategoryCount);
        double sum = 0;
        for (const auto& c : cats)
            sum += c.toObject()["bytes"].toDouble();
        // At 75: 604 KiB, all inside the segment.
        QCOMPARE(sum, s["allocated_bytes"].toDouble());
        QCOMPARE(sum, double(604 * KiB));
        QCOMPARE(cats[0].toObject()["category"].toString(), QString("activations"));
        QCOMPARE(cats[0].toObject()["bytes"].toDouble(), double(264 * KiB));
        const auto bad = fstest::runCli(
            {"state", QString::fromStdString(kinds_), "--at", "end", "--by", "stream"});
        QVERIFY(bad.exitCode != 0);
        QVERIFY(bad.err.contains("--by"));
    }

    void cliCompareByCallSiteJson()
    {
        const auto r = fstest::runCli({"compare", QString::fromStdString(a_),
                                       QString::fromStdString(b_), "--by", "callsite", "--json"});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject o = fstest::cliJson(r);
        QCOMPARE(o["at"].toString(), QString("peak"));
        QCOMPARE(o["a"].toObject()["held_bytes"].toDouble(), double(448 * KiB));
        const QJsonArray rows = o["callsites"].toArray();
        QCOMPARE(rows.size(), 3);
        const QJsonObject first = rows[0].toObject();
        QVERIFY(first["site"].toString().contains("model.py:20"));
        QCOMPARE(first["a_bytes"].toDouble(), double(128 * KiB));
        QCOMPARE(first["b_bytes"].toDouble(), double(256 * KiB));
        QCOMPARE(first["delta_bytes"].toDouble(), double(128 * KiB));
        const auto end =
            fstest::runCli({"compare", QString::fromStdString(a_), QString::fromStdString(b_),
                            "--by", "callsite", "--at", "end", "--json"});
        QCOMPARE(end.exitCode, 0);
        QCOMPARE(
            fstest::cliJson(end)["callsites"].toArray()[2].toObject()["delta_bytes"].toDouble(),
            -double(128 * KiB));
    }
};

QTEST_GUILESS_MAIN(TstCategories)
#include "tst_categories.moc"
