// The verdict's statistics and the report's q-values (core/analysis/stats.h) with known answers
// worked out in the comments.
#include "core/analysis/stats.h"

#include <QTest>
#include <cmath>
#include <limits>

using namespace fs::analysis;

namespace {
const double inf = std::numeric_limits<double>::infinity();
}

class TstAnalysisStats : public QObject
{
    Q_OBJECT
private slots:
    void medianAndScale()
    {
        QCOMPARE(median({3, 1, 2}), 2.0);
        QCOMPARE(median({4, 1, 3, 2}), 2.5);
        QCOMPARE(median({}), 0.0);
        // 1, 2, 3, 4, 100: median 3, absolute deviations 2, 1, 0, 1, 97 -> MAD 1: 1.4826.
        const std::vector<double> v = {1, 2, 3, 4, 100};
        QCOMPARE(robustScale(v, 3), 1.4826);
        // 0, 0, 0, 0, 2: MAD 0, mean absolute deviation 2 / 5 = 0.4: 1.2533 x 0.4 = 0.50132.
        const std::vector<double> w = {0, 0, 0, 0, 2};
        QVERIFY(std::fabs(robustScale(w, 0) - 0.50132) < 1e-12);
        const std::vector<double> c = {5, 5, 5};
        QCOMPARE(robustScale(c, 5), 0.0);
    }

    void robustZ_data()
    {
        QTest::addColumn<std::vector<double>>("healthy");
        QTest::addColumn<double>("x");
        QTest::addColumn<double>("z");
        // Median 3, spread 1.4826: (10 - 3) / 1.4826 = 4.72143.
        QTest::newRow("spread") << std::vector<double>{1, 2, 3, 4, 100} << 10.0 << 7 / 1.4826;
        // One-sided: at or below the median is no departure.
        QTest::newRow("below") << std::vector<double>{1, 2, 3, 4, 100} << 2.0 << 0.0;
        // The healthy frames never varied: any rise is infinitely far.
        QTest::newRow("constant") << std::vector<double>{0, 0, 0} << 1e-9 << inf;
        QTest::newRow("constant, equal") << std::vector<double>{7, 7, 7} << 7.0 << 0.0;
        // MAD 0, mean absolute deviation 0.4: (2 - 0) / 0.50132 = 3.98947.
        QTest::newRow("mean deviation")
            << std::vector<double>{0, 0, 0, 0, 2} << 2.0 << 2 / (1.2533 * 0.4);
    }
    void robustZ()
    {
        QFETCH(std::vector<double>, healthy);
        QFETCH(double, x);
        QFETCH(double, z);
        const double got = fs::analysis::robustZ(x, healthy);
        if (std::isinf(z))
            QVERIFY(std::isinf(got));
        else
            QVERIFY2(std::fabs(got - z) < 1e-9, QByteArray::number(got));
    }

    void departure_data()
    {
        QTest::addColumn<std::vector<double>>("healthy");
        QTest::addColumn<double>("x");
        QTest::addColumn<bool>("standsOut");
        QTest::addColumn<double>("threshold");
        QTest::addColumn<double>("floor");
        // Healthy 10, 11, 12, 13, 14: median 12, MAD 1, spread 1.4826. Leaving one out, the
        // largest departure is 14 against 10, 11, 12, 13 (median 11.5, MAD 1, spread 1.4826):
        // 2.5 / 1.4826 = 1.6862 < 3.5, so the threshold is 3.5. x = 20: z = 8 / 1.4826 = 5.396,
        // stands out; x = 16: z = 2.698, does not.
        QTest::newRow("normal, out")
            << std::vector<double>{10, 11, 12, 13, 14} << 20.0 << true << 3.5 << -inf;
        QTest::newRow("normal, in")
            << std::vector<double>{10, 11, 12, 13, 14} << 16.0 << false << 3.5 << -inf;
        // Healthy 0, 0, 0, 0, 5: frame 5 departs infinitely from four that never varied, so
        // x must exceed 5 (the floor) as well as 3.5 robust deviations (spread 1.2533 x 1 =
        // 1.2533, x = 5 gives z = 3.99 but equals the floor; x = 6 gives 4.79 and stands out).
        QTest::newRow("floor, equal")
            << std::vector<double>{0, 0, 0, 0, 5} << 5.0 << false << 3.5 << 5.0;
        QTest::newRow("floor, above")
            << std::vector<double>{0, 0, 0, 0, 5} << 6.0 << true << 3.5 << 5.0;
        // Healthy 0, 0, 0, 0, 0: anything above stands out.
        QTest::newRow("never varied")
            << std::vector<double>{0, 0, 0, 0, 0} << 1.0 << true << 3.5 << -inf;
        // Two healthy frames are too few to tell a spread.
        QTest::newRow("too few") << std::vector<double>{0, 0} << 1.0 << false << 3.5 << -inf;
        // Healthy 0, 0, 0, 4, 6: leaving out 6 gives 0, 0, 0, 4 (median 0, MAD 0, mean
        // deviation 1, spread 1.2533): 6 / 1.2533 = 4.7874, the threshold; leaving out 4 gives
        // 4 / (1.2533 x 1.5) = 2.1277. Against all five (median 0, mean deviation 2, spread
        // 2.5066): x = 11 gives z = 4.3884, above 3.5 but not above the healthy frames' own
        // 4.7874, so not out; x = 13 gives 5.1863 and stands out.
        QTest::newRow("healthy departures")
            << std::vector<double>{0, 0, 0, 4, 6} << 11.0 << false << 6 / 1.2533 << -inf;
        QTest::newRow("beyond them")
            << std::vector<double>{0, 0, 0, 4, 6} << 13.0 << true << 6 / 1.2533 << -inf;
    }
    void departure()
    {
        QFETCH(std::vector<double>, healthy);
        QFETCH(double, x);
        QFETCH(bool, standsOut);
        QFETCH(double, threshold);
        QFETCH(double, floor);
        const Departure d = fs::analysis::departure(x, healthy);
        QCOMPARE(d.standsOut, standsOut);
        QVERIFY2(std::fabs(d.threshold - threshold) < 1e-9, QByteArray::number(d.threshold));
        QCOMPARE(d.floor, floor);
        QCOMPARE(d.value, x);
    }

    void baseRate_data()
    {
        QTest::addColumn<std::vector<double>>("healthy");
        QTest::addColumn<double>("x");
        QTest::addColumn<int64_t>("departed");
        QTest::addColumn<double>("rate");
        QTest::addColumn<bool>("common");
        // 0, 0, 5, 6, 1 against x = 5: 5 and 6 reach it (>= x), 2 of 5 = 40 % > 5 %: common.
        QTest::newRow("common") << std::vector<double>{0, 0, 5, 6, 1} << 5.0 << int64_t{2} << 0.4
                                << true;
        // x = 7: no healthy frame reaches it: 0 %, rare.
        QTest::newRow("never") << std::vector<double>{0, 0, 5, 6, 1} << 7.0 << int64_t{0} << 0.0
                               << false;
        // 1 of 20 = 5 %: not above the 5 % limit, so still rare; 2 of 20 = 10 % is common.
        std::vector<double> twenty(20, 0.0);
        twenty[3] = 9;
        QTest::newRow("one in twenty") << twenty << 9.0 << int64_t{1} << 0.05 << false;
        twenty[11] = 12;
        QTest::newRow("two in twenty") << twenty << 9.0 << int64_t{2} << 0.1 << true;
        // 1 of 2 frames (50 %) is too few frames to call anything common (kMinHealthyFrames 3).
        QTest::newRow("too few") << std::vector<double>{0, 4} << 4.0 << int64_t{1} << 0.5 << false;
        QTest::newRow("none") << std::vector<double>{} << 1.0 << int64_t{0} << 0.0 << false;
    }
    void baseRate()
    {
        QFETCH(std::vector<double>, healthy);
        QFETCH(double, x);
        QFETCH(int64_t, departed);
        QFETCH(double, rate);
        QFETCH(bool, common);
        const BaseRate b = fs::analysis::baseRate(x, healthy);
        QCOMPARE(b.frames, static_cast<int64_t>(healthy.size()));
        QCOMPARE(b.departed, departed);
        QVERIFY2(std::fabs(b.rate - rate) < 1e-12, QByteArray::number(b.rate));
        QCOMPARE(b.common, common);
    }

    void benjaminiHochberg()
    {
        // m = 5 p-values 0.01, 0.04, 0.03, 0.20, 0.005. Sorted: 0.005 (rank 1), 0.01 (2),
        // 0.03 (3), 0.04 (4), 0.20 (5); m p / rank: 0.025, 0.025, 0.05, 0.05, 0.20; running
        // minimum from the largest rank down: 0.20, 0.05, 0.05, 0.025, 0.025. Back in input
        // order: q = 0.025, 0.05, 0.05, 0.20, 0.025. Only the first and last (q < 0.05) are
        // significant, although four p-values are under 0.05.
        const std::vector<double> p = {0.01, 0.04, 0.03, 0.20, 0.005};
        const std::vector<double> q = fs::analysis::benjaminiHochberg(p);
        const std::vector<double> want = {0.025, 0.05, 0.05, 0.20, 0.025};
        QCOMPARE(q.size(), want.size());
        for (size_t i = 0; i < q.size(); ++i)
            QVERIFY2(std::fabs(q[i] - want[i]) < 1e-12, QByteArray::number(q[i]));
        // A NaN is no test: it keeps NaN and does not count in m (0.01 alone: q = 0.01).
        const std::vector<double> withNan = {std::nan(""), 0.01};
        const std::vector<double> q2 = fs::analysis::benjaminiHochberg(withNan);
        QVERIFY(std::isnan(q2[0]));
        QCOMPARE(q2[1], 0.01);
        // p 0.9 and 0.95: m p / rank = 1.8 and 0.95; the running minimum from the top makes both
        // 0.95 (and any value above 1 would be capped at 1).
        const std::vector<double> high = {0.9, 0.95};
        const std::vector<double> q3 = fs::analysis::benjaminiHochberg(high);
        QCOMPARE(q3[0], 0.95);
        QCOMPARE(q3[1], 0.95);
    }

    void adjustCorrelations()
    {
        // Three pairs, one not tested (p NaN: too few changes): BH over the two tested ones, p
        // 0.01 and 0.04 -> m p / rank = 0.02 and 0.04. The untested pair keeps q NaN and is
        // never significant.
        std::vector<Correlation> c(3);
        c[0].p = 0.01;
        c[1].p = 0.04;
        c[2].p = std::numeric_limits<double>::quiet_NaN();
        adjustForMultipleTests(c);
        QVERIFY(std::fabs(c[0].q - 0.02) < 1e-12);
        QVERIFY(std::fabs(c[1].q - 0.04) < 1e-12);
        QVERIFY(std::isnan(c[2].q));
    }
};

QTEST_GUILESS_MAIN(TstAnalysisStats)
#include "tst_analysis_stats.moc"
