// Known answers for the pure metric functions (metrics.h): size classes, entropy, histogram
// bins, bursts, trend, correlation with p-values, Hilbert curve.
#include "core/analysis/metrics.h"
#include "core/analysis/raster_grid.h"

#include <QTest>
#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <set>
#include <vector>

using namespace fs::analysis;

class TstAnalysisMetrics : public QObject
{
    Q_OBJECT
private slots:
    void sizeClasses_data()
    {
        QTest::addColumn<qulonglong>("bytes");
        QTest::addColumn<int>("cls");
        // Class n = 2..12 holds (2^(n-1), 2^n] KiB; index = n - 2.
        QTest::newRow("0 B") << 0ULL << 0;
        QTest::newRow("1 B") << 1ULL << 0;
        QTest::newRow("4 KiB") << 4096ULL << 0;     // <= 4 KiB: first class
        QTest::newRow("4 KiB + 1") << 4097ULL << 1; // (4, 8] KiB
        QTest::newRow("8 KiB") << 8192ULL << 1;
        QTest::newRow("8 KiB + 1") << 8193ULL << 2;
        QTest::newRow("256 KiB") << 262144ULL << 6;     // n = 8
        QTest::newRow("2 MiB + 1") << 2097153ULL << 10; // (2, 4] MiB: last class
        QTest::newRow("4 MiB") << 4194304ULL << 10;
        QTest::newRow("1 GiB") << 1073741824ULL << 10; // > 4 MiB: last class too
    }
    void sizeClasses()
    {
        QFETCH(qulonglong, bytes);
        QFETCH(int, cls);
        QCOMPARE(sizeClass(bytes), cls);
    }

    void entropy()
    {
        // Two equally frequent classes: -2 * 0.5 log2 0.5 = exactly 1 bit.
        SizeClassCounts c;
        c.add(3000);   // class 0
        c.add(100000); // (64, 128] KiB
        QCOMPARE(c.bits(), 1.0);
        // Four equal classes: 2 bits; one class: 0 bits.
        c.add(5000);
        c.add(9000);
        QCOMPARE(c.bits(), 2.0);
        SizeClassCounts one;
        one.add(1 << 20);
        one.add(1 << 20);
        QCOMPARE(one.bits(), 0.0);
        // p = (3/4, 1/4): H = -(0.75 log2 0.75 + 0.25 log2 0.25) = 0.811278...
        const std::vector<int64_t> counts{3, 1, 0};
        QVERIFY(std::fabs(entropyBits(counts) - 0.8112781244591328) < 1e-12);
        // All 11 classes equally: log2 11 = 3.459 bits, the maximum (docs/analysis.md).
        std::vector<int64_t> all(11, 7);
        QVERIFY(std::fabs(entropyBits(all) - std::log2(11.0)) < 1e-12);
    }

    void histogramBins()
    {
        // 1024 and 1500 share the log2 bin [1 KiB, 2 KiB); 8192 -> [8, 16) KiB; 100000 ->
        // [64, 128) KiB; 300000 -> [256, 512) KiB. Seed clusters: 8192 in 8-32 KiB, 100000 in
        // 64-128 KiB, 300000 in >= 256 KiB.
        const std::vector<uint64_t> sizes{1024, 1500, 8192, 100000, 300000};
        const Histogram h = makeHistogram(sizes);
        QCOMPARE(h.log2.size(), size_t{4});
        QCOMPARE(h.log2[0].lo, uint64_t{1024});
        QCOMPARE(h.log2[0].hi, uint64_t{2048});
        QCOMPARE(h.log2[0].count, int64_t{2});
        QCOMPARE(h.log2[0].bytes, uint64_t{2524});
        QCOMPARE(h.log2[1].lo, uint64_t{8192});
        QCOMPARE(h.log2[2].lo, uint64_t{65536});
        QCOMPARE(h.log2[3].lo, uint64_t{262144});
        QCOMPARE(h.log2[3].bytes, uint64_t{300000});
        QCOMPARE(h.clusters.size(), size_t{3});
        QCOMPARE(h.clusters[0].count, int64_t{1});
        QCOMPARE(h.clusters[0].bytes, uint64_t{8192});
        QCOMPARE(h.clusters[1].count, int64_t{1});
        QCOMPARE(h.clusters[2].count, int64_t{1});
        QCOMPARE(h.clusters[2].hi, uint64_t{0}); // unbounded
        // Cluster edges are inclusive: 32 KiB and 128 KiB belong, 33 KiB does not.
        QCOMPARE(clusterOf(32 * 1024), 0);
        QCOMPARE(clusterOf(33 * 1024), -1);
        QCOMPARE(clusterOf(128 * 1024), 1);
        QCOMPARE(clusterOf(256 * 1024 - 1), -1);
        // The log2 bins the views shade: 8-32 KiB covers [2^13, 2^14) and [2^14, 2^15) (32 KiB
        // itself opens bin 15), 64-128 KiB bin 16 only, >= 256 KiB from bin 18 with no end.
        QCOMPARE(clusterFirstBin(kClusterRanges[0]), 13);
        QCOMPARE(clusterLastBin(kClusterRanges[0]), 14);
        QCOMPARE(clusterFirstBin(kClusterRanges[1]), 16);
        QCOMPARE(clusterLastBin(kClusterRanges[1]), 16);
        QCOMPARE(clusterFirstBin(kClusterRanges[2]), 18);
        QCOMPARE(clusterLastBin(kClusterRanges[2]), -1);
        // Entropy over 11 equally used classes: log2 11 = 3.4594 bits, the most there can be.
        QVERIFY(std::abs(maxSizeClassEntropyBits() - 3.459431619) < 1e-9);
        std::array<int64_t, kSizeClasses> even{};
        even.fill(5);
        QVERIFY(std::abs(entropyBits(even) - maxSizeClassEntropyBits()) < 1e-12);
    }

    void fragmentSizesKeepTheLargest()
    {
        // Known answers: sizes 5, 9, 9, 3 -> largest 9, 4 fragments counted; one 9 removed -> still
        // 9 (two were counted); the other 9 removed -> 5; a size never added (7) removed -> no
        // change; 5 and 3 removed -> empty, largest 0.
        FragmentSizes f;
        QCOMPARE(f.largest(), uint64_t{0});
        for (uint64_t v : {5, 9, 9, 3})
            f.add(v);
        QCOMPARE(f.largest(), uint64_t{9});
        QCOMPARE(f.count(), size_t{4});
        f.remove(9);
        QCOMPARE(f.largest(), uint64_t{9});
        f.remove(9);
        QCOMPARE(f.largest(), uint64_t{5});
        f.remove(7);
        QCOMPARE(f.largest(), uint64_t{5});
        f.remove(5);
        f.remove(3);
        QCOMPARE(f.largest(), uint64_t{0});
        QCOMPARE(f.count(), size_t{0});

        // Past kFlatMax fragments it switches to its map and back below a quarter: the
        // largest after every step equals a reference multiset's, in both forms and across
        // both switches. Sizes 1..3000 added in a shuffled order (largest then 3000), then
        // removed in another (largest: the greatest not yet removed).
        std::mt19937_64 rng(7);
        std::vector<uint64_t> sizes(3000);
        for (size_t i = 0; i < sizes.size(); ++i)
            sizes[i] = i + 1;
        std::shuffle(sizes.begin(), sizes.end(), rng);
        std::multiset<uint64_t> ref;
        bool sawMap = false;
        for (uint64_t v : sizes) {
            f.add(v);
            f.add(v); // counted twice: one remove keeps it
            ref.insert(v);
            QCOMPARE(f.largest(), *ref.rbegin());
            sawMap = sawMap || f.usesMap();
        }
        QVERIFY(sawMap);
        QCOMPARE(f.largest(), uint64_t{3000});
        std::shuffle(sizes.begin(), sizes.end(), rng);
        bool backToArray = false;
        for (uint64_t v : sizes) {
            f.remove(v);
            QCOMPARE(f.largest(), *ref.rbegin()); // one of two copies left: unchanged
            f.remove(v);
            ref.erase(v);
            QCOMPARE(f.largest(), ref.empty() ? uint64_t{0} : *ref.rbegin());
            QCOMPARE(f.count(), 2 * ref.size()); // the others' two copies
            backToArray = backToArray || (sawMap && !f.usesMap());
        }
        QVERIFY(backToArray);
    }

    void burstsSplitAtTheGap()
    {
        // Gaps: 1 ms, 1 ms, 8 ms, 1 ms, 5 ms (= gap: splits), with a 5 ms gap:
        // bursts {0,1,2 ms}, {10,11 ms}, {16 ms}.
        const std::vector<int64_t> t{0, 1'000'000, 2'000'000, 10'000'000, 11'000'000, 16'000'000};
        const std::vector<uint64_t> s{10, 20, 30, 40, 50, 60};
        const auto b = splitBursts(t, s, 5'000'000);
        QCOMPARE(b.size(), size_t{3});
        // Without the list: 2 bursts of more than one allocation, the largest of 3.
        BurstSplitter only(5'000'000, false);
        for (size_t i = 0; i < t.size(); ++i)
            only.add(t[i], s[i]);
        QCOMPARE(only.summary().bursts, int64_t{2});
        QCOMPARE(only.summary().largestAllocations, int64_t{3});
        QVERIFY(only.take().empty());
        QCOMPARE(b[0].allocations, int64_t{3});
        QCOMPARE(b[0].bytes, uint64_t{60});
        QCOMPARE(b[0].end, int64_t{2'000'000});
        QCOMPARE(b[1].allocations, int64_t{2});
        QCOMPARE(b[1].begin, int64_t{10'000'000});
        QCOMPARE(b[2].allocations, int64_t{1});
    }

    void trendOnALine()
    {
        // y = 2x + 1 exactly: slope 2, intercept 1, R^2 1.
        const std::vector<double> x{0, 1, 2, 3, 4};
        const std::vector<double> y{1, 3, 5, 7, 9};
        const Trend t = fitTrend(x, y);
        QCOMPARE(t.n, int64_t{5});
        QVERIFY(std::fabs(t.slope - 2) < 1e-12);
        QVERIFY(std::fabs(t.intercept - 1) < 1e-12);
        QVERIFY(std::fabs(t.r2 - 1) < 1e-12);
        // y = (1, 3, 2): slope 0.5, R^2 = Sxy^2/(Sxx Syy) = 1/(2*2) = 0.25.
        const std::vector<double> x3{0, 1, 2}, y3{1, 3, 2};
        const Trend t3 = fitTrend(x3, y3);
        QVERIFY(std::fabs(t3.slope - 0.5) < 1e-12);
        QVERIFY(std::fabs(t3.r2 - 0.25) < 1e-12);
    }

    void correlation()
    {
        // x = 1..5, y = (1,2,3,5,4): Sxy = 9, Sxx = Syy = 10 -> r = 0.9; ranks equal the values
        // so Spearman is 0.9 too. t = 0.9 sqrt(3 / 0.19) = 3.5762; two-sided p with 3 df
        // (closed form 1 - 2/pi (atan(t/sqrt3) + (t/sqrt3)/(1 + t^2/3))) = 0.0373861.
        const std::vector<double> x{1, 2, 3, 4, 5}, y{1, 2, 3, 5, 4};
        const Correlation c = correlate(x, y);
        QCOMPARE(c.n, int64_t{5});
        QVERIFY(std::fabs(c.pearson - 0.9) < 1e-12);
        QVERIFY(std::fabs(c.spearman - 0.9) < 1e-12);
        QVERIFY(std::fabs(correlationPValue(0.9, 5) - 0.03738607346849865) < 1e-9);
        // r = 0.5 over n = 3 (1 df): p = 1 - 2/pi atan(1/sqrt 3) = 2/3 exactly.
        QVERIFY(std::fabs(correlationPValue(0.5, 3) - 2.0 / 3.0) < 1e-9);
        // Fewer than 3 (effective) pairs: nothing to test.
        QCOMPARE(correlationPValue(0.99, 2.5), 1.0);
        // Four changes are too few to test (kCorrelationMinChanges): p NaN, q NaN.
        QVERIFY(std::isnan(c.p));
        QVERIFY(std::isnan(c.q));
        // Spearman sees a monotone but non-linear relation as perfect: y = x^3.
        const std::vector<double> y3{1, 8, 27, 64, 125};
        const Correlation m = correlate(x, y3);
        QVERIFY(std::fabs(m.spearman - 1) < 1e-12);
        QVERIFY(m.pearson < 0.99);
        // NaN pairs are skipped and n says so.
        const std::vector<double> xn{1, 2, NAN, 4}, yn{2, 4, 6, 8};
        QCOMPARE(correlate(xn, yn).n, int64_t{3});
        // Ties get average ranks: (1, 2, 2, 3) -> (1, 2.5, 2.5, 4).
        const std::vector<double> tie{1, 2, 2, 3};
        const auto r = averageRanks(tie);
        QCOMPARE(r[1], 2.5);
        QCOMPARE(r[3], 4.0);
        // v = (3, 1, 2, 2, 5) ranks (4, 1, 2.5, 2.5, 5); without v[2] the rest (3, 1, 2, 5)
        // ranks (3, 1, 2, 4): 3 and 5 move down one, the other 2 leaves its tie (-0.5).
        const std::vector<double> v{3, 1, 2, 2, 5};
        QCOMPARE(fs::analysis::ranksWithout(averageRanks(v), v, 2),
                 (std::vector<double>{3, 1, 2, 4}));
    }

    void effectiveSampleSize_data()
    {
        QTest::addColumn<std::vector<double>>("a");
        QTest::addColumn<std::vector<double>>("b");
        QTest::addColumn<double>("expected");
        // m = 5, one lag (m / 5). a = b = (1, -1, 1, -1, 1): mean 0.2, deviations 0.8, -1.2,
        // 0.8, -1.2, 0.8; c0 = 3 * 0.64 + 2 * 1.44 = 4.8; lag-1 sum 4 * (0.8 * -1.2) = -3.84,
        // rho(1) = -0.8 for both. 1/n_eff = 1/5 + 2/5 * (4/5) * 0.64 = 0.4048 -> 2.47036.
        QTest::newRow("alike") << std::vector<double>{1, -1, 1, -1, 1}
                               << std::vector<double>{1, -1, 1, -1, 1} << 1 / 0.4048;
        // b = (1, 1, -1, -1, 1): mean 0.2, deviations 0.8, 0.8, -1.2, -1.2, 0.8; c0 4.8; lag-1
        // sum 0.64 - 0.96 + 1.44 - 0.96 = 0.16 -> rho 1/30. The product with a's -0.8 is
        // negative: no fewer than m independent pairs, so n_eff = m = 5.
        QTest::newRow("opposite") << std::vector<double>{1, -1, 1, -1, 1}
                                  << std::vector<double>{1, 1, -1, -1, 1} << 5.0;
        // m = 10, two lags. Both (1, 2, 1, 2, ...): mean 1.5, deviations +-0.5, c0 = 2.5; lag 1:
        // 9 * -0.25 = -2.25 -> rho -0.9; lag 2: 8 * 0.25 = 2 -> rho 0.8; weights 9/10 and 8/10:
        // 1/n_eff = 1/10 + 2/10 (0.9 * 0.81 + 0.8 * 0.64) = 0.3482 -> 2.87191.
        QTest::newRow("two lags") << std::vector<double>{1, 2, 1, 2, 1, 2, 1, 2, 1, 2}
                                  << std::vector<double>{1, 2, 1, 2, 1, 2, 1, 2, 1, 2}
                                  << 1 / (0.1 + 0.2 * (0.9 * 0.81 + 0.8 * 0.64));
    }

    void effectiveSampleSize()
    {
        QFETCH(std::vector<double>, a);
        QFETCH(std::vector<double>, b);
        QFETCH(double, expected);
        QVERIFY2(std::fabs(fs::analysis::effectiveSampleSize(a, b) - expected) < 1e-9,
                 qPrintable(QString::number(fs::analysis::effectiveSampleSize(a, b), 'g', 10)));
    }

    void correlationTestOnChanges()
    {
        // x = (1,2,3,5,4,6,8,7,9,12,10,11,13), y = (2,1,4,3,6,5,8,9,7,10,12,11,14): 12
        // changes dx = (1,1,2,-1,2,2,-1,2,3,-2,1,2), dy = (-1,3,-1,3,-1,3,1,-2,3,2,-1,3). Lag 0
        // pairs dx[i] with dy[i]; lag 1 (x leading) dx[0..10] with dy[1..11]. Four tests:
        // Pearson and Spearman (Pearson of the ranks) at each lag, each p from Student's t
        // with its n_eff - 2 degrees of freedom; the pair's p is the smallest times 4
        // (Bonferroni), and its lag and coefficient are that test's.
        const std::vector<double> x{1, 2, 3, 5, 4, 6, 8, 7, 9, 12, 10, 11, 13},
            y{2, 1, 4, 3, 6, 5, 8, 9, 7, 10, 12, 11, 14};
        const std::vector<double> dx0{1, 1, 2, -1, 2, 2, -1, 2, 3, -2, 1, 2},
            dy0{-1, 3, -1, 3, -1, 3, 1, -2, 3, 2, -1, 3};
        const std::vector<double> dx1(dx0.begin(), dx0.end() - 1), dy1(dy0.begin() + 1, dy0.end());
        struct One
        {
            int lag;
            bool spearman;
            double r, p;
        };
        std::vector<One> tests;
        for (int lag : {0, 1})
            for (bool spearman : {false, true}) {
                const std::vector<double>& a0 = lag ? dx1 : dx0;
                const std::vector<double>& b0 = lag ? dy1 : dy0;
                const std::vector<double> a = spearman ? averageRanks(a0) : a0;
                const std::vector<double> b = spearman ? averageRanks(b0) : b0;
                const double r = correlate(a, b).pearson;
                tests.push_back({lag, spearman, r,
                                 correlationPValue(r, fs::analysis::effectiveSampleSize(a, b))});
            }
        const One best = *std::min_element(tests.begin(), tests.end(),
                                           [](const One& u, const One& v) { return u.p < v.p; });
        const Correlation c = correlate(x, y);
        QCOMPARE(c.lag, best.lag);
        QCOMPARE(c.changeSpearman, best.spearman);
        QVERIFY(std::fabs(c.changeR - best.r) < 1e-12);
        QVERIFY(std::fabs(c.p - std::min(1.0, 4 * best.p)) < 1e-12);
        QCOMPARE(c.q, c.p);
        // Lag 0 only (a graph replay against the state at its own start): the smaller of the
        // two lag-0 p-values times 2.
        const Correlation c0 = correlate(x, y, 0);
        QCOMPARE(c0.lag, 0);
        QVERIFY(std::fabs(c0.p - std::min(1.0, 2 * std::min(tests[0].p, tests[1].p))) < 1e-12);
        QCOMPARE(fs::analysis::correlationTestName(c0),
                 std::string("changes, Bartlett n_eff, Pearson+Spearman, lag 0"));
        QCOMPARE(fs::analysis::correlationTestName(c),
                 std::string("changes, Bartlett n_eff, Pearson+Spearman, lag 0-1"));
        // 11 frames make 10 changes at lag 0 (tested) and 9 at lag 1 (not): Bonferroni over the
        // two lag-0 tests only.
        const std::vector<double> x11(x.begin(), x.begin() + 11), y11(y.begin(), y.begin() + 11);
        const Correlation c11 = correlate(x11, y11);
        QCOMPARE(c11.lag, 0);
        QVERIFY(!std::isnan(c11.p));
        // Too few frames to form kCorrelationMinChanges changes: coefficients but no test.
        const Correlation few = correlate(std::vector<double>(x.begin(), x.begin() + 10),
                                          std::vector<double>(y.begin(), y.begin() + 10));
        QCOMPARE(few.n, int64_t{10});
        QVERIFY(std::isnan(few.p));
    }

    void diffGridResolvesInPlace()
    {
        // The difference-array grid behind the rasters (raster_grid.h). A 4 x 3 grid:
        //  - [0.5, 2.5) x [0, 1): row 0 covers half of cell 0, all of cell 1, half of cell 2;
        //  - [3, 3.5) x [2, 2.25): inside cell (3, 2), the single-cell path: 0.5 * 0.25 = 0.125;
        //  - [1, 3) x [1, 3), weight 2: cells 1 and 2 of rows 1 and 2 get 2 each.
        fs::analysis::DiffGrid g(4, 3);
        g.addRect(0.5, 2.5, 0, 1);
        g.addRect(3, 3.5, 2, 2.25);
        g.addRect(1, 3, 1, 3, 2.0);
        const std::vector<double> expected = {0.5, 1, 0.5, 0, 0, 2, 2, 0, 0, 2, 2, 0.125};
        QVERIFY(g.resolve() == expected);
        std::vector<double> ones(12, 1.0);
        g.addTo(ones);
        for (size_t k = 0; k < ones.size(); ++k)
            QCOMPARE(ones[k], expected[k] + 1.0);
        QVERIFY(fs::analysis::DiffGrid(g).take() == expected);
        // take() writes cell k over the difference at idx(x, y) >= k: on random rectangles it
        // must give resolve()'s values to the bit (a write ahead of its read would not).
        std::mt19937 rng(7);
        std::uniform_real_distribution<double> ux(-3, 40), uy(-3, 26), uw(0.01, 9), wt(0.1, 3);
        fs::analysis::DiffGrid r(37, 23);
        struct Rect
        {
            double x0, x1, y0, y1, w;
        };
        std::vector<Rect> rects;
        for (int i = 0; i < 500; ++i) {
            Rect q{};
            q.x0 = ux(rng);
            q.y0 = uy(rng);
            q.x1 = q.x0 + uw(rng) * (i % 3 == 0 ? 0.05 : 1);
            q.y1 = q.y0 + uw(rng);
            q.w = wt(rng);
            rects.push_back(q);
            r.addRect(q.x0, q.x1, q.y0, q.y1, q.w);
        }
        const std::vector<double> want = r.resolve();
        // Each cell against its coverage worked out directly: the overlap of the cell's
        // [x, x + 1) x [y, y + 1) with every rectangle (clipped to the grid), times its weight.
        {
            std::vector<double> direct(want.size(), 0.0);
            auto overlap = [](double a, double b, double c) {
                return std::max(0.0, std::min(b, c + 1) - std::max(a, c));
            };
            for (const Rect& q : rects)
                for (int cy = 0; cy < 23; ++cy)
                    for (int cx = 0; cx < 37; ++cx)
                        direct[static_cast<size_t>(cy * 37 + cx)] +=
                            q.w * overlap(q.x0, q.x1, cx) * overlap(q.y0, q.y1, cy);
            for (size_t k = 0; k < want.size(); ++k)
                QVERIFY2(std::abs(want[k] - direct[k]) < 1e-9,
                         qPrintable(
                             QString("cell %1: %2 against %3").arg(k).arg(want[k]).arg(direct[k])));
        }
        std::vector<double> zeros(want.size(), 0.0);
        r.addTo(zeros);
        QVERIFY(zeros == want);
        QVERIFY(std::move(r).take() == want);
    }

    void hilbert()
    {
        // Side 2: the curve visits (0,0), (0,1), (1,1), (1,0).
        int x = 0, y = 0;
        hilbertXY(2, 1, x, y);
        QCOMPARE(x, 0);
        QCOMPARE(y, 1);
        hilbertXY(2, 3, x, y);
        QCOMPARE(x, 1);
        QCOMPARE(y, 0);
        // Round trip and adjacency on a 16 x 16 grid: consecutive positions are neighbours.
        int px = 0, py = 0;
        for (uint64_t d = 0; d < 256; ++d) {
            hilbertXY(16, d, x, y);
            QCOMPARE(hilbertD(16, x, y), d);
            if (d > 0) QCOMPARE(std::abs(x - px) + std::abs(y - py), 1);
            px = x;
            py = y;
        }
    }
};

QTEST_GUILESS_MAIN(TstAnalysisMetrics)
#include "tst_analysis_metrics.moc"
