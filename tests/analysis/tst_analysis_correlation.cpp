// Calibration of the correlation test (docs/analysis.md "Correlations"): on independent but
// autocorrelated series it must call no more pairs significant than its nominal 5 %, at every
// autocorrelation (pooled over the lengths 20-500) and overall; on series that share a signal (at
// lag 0 or with the allocator figure one frame ahead) it must still find them. The test of plain
// Pearson over frames, which the report used before, is run beside it on the same pairs: its
// false-alarm rate must be far above 5 % here, so this set of series would catch a test that
// ignores autocorrelation.
#include "core/analysis/metrics.h"
#include "core/analysis/stats.h"

#include <QTest>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

using fs::analysis::correlate;
using fs::analysis::Correlation;

namespace {

// Standard normal draws by Box-Muller over mt19937_64: the same numbers on every standard
// library (std::normal_distribution is not specified exactly).
class Normal
{
public:
    explicit Normal(uint64_t seed) : gen_(seed) {}
    double operator()()
    {
        if (have_) {
            have_ = false;
            return next_;
        }
        const double u1 = (static_cast<double>(gen_() >> 11) + 0.5) * 0x1p-53;
        const double u2 = static_cast<double>(gen_() >> 11) * 0x1p-53;
        const double r = std::sqrt(-2 * std::log(u1));
        next_ = r * std::sin(2 * M_PI * u2);
        have_ = true;
        return r * std::cos(2 * M_PI * u2);
    }

private:
    std::mt19937_64 gen_;
    double next_ = 0;
    bool have_ = false;
};

// x_t = phi x_(t-1) + e_t, started from the stationary distribution (phi < 1).
std::vector<double> ar1(Normal& z, int n, double phi)
{
    std::vector<double> x(static_cast<size_t>(n));
    double v = z() / std::sqrt(1 - phi * phi);
    for (double& xi : x) {
        v = phi * v + z();
        xi = v;
    }
    return x;
}

constexpr double kPhis[] = {0.0, 0.3, 0.5, 0.7, 0.9, 0.95};
// 12 frames: 11 changes, just over kCorrelationMinChanges.
constexpr int kLengths[] = {12, 20, 50, 100, 200, 500};
constexpr int kPairsPerCell = 200; // 6 x 6 x 200 = 7200 pairs, 1200 per phi

} // namespace

class TstAnalysisCorrelation : public QObject
{
    Q_OBJECT
private slots:
    void falseAlarmsOnIndependentAutocorrelatedSeries()
    {
        Normal z(20261207);
        int total = 0, totalSignificant = 0, totalNaive = 0;
        for (double phi : kPhis) {
            int pairs = 0, significant = 0, naive = 0, worstCell = 0;
            for (int n : kLengths) {
                int cell = 0;
                for (int k = 0; k < kPairsPerCell; ++k) {
                    const std::vector<double> x = ar1(z, n, phi), y = ar1(z, n, phi);
                    const Correlation c = correlate(x, y);
                    // One pair alone: its q is its p (Benjamini-Hochberg over one test).
                    ++pairs;
                    if (c.q < fs::analysis::kSignificanceLevel) {
                        ++significant;
                        ++cell;
                    }
                    if (fs::analysis::correlationPValue(c.pearson, static_cast<double>(c.n)) <
                        fs::analysis::kSignificanceLevel)
                        ++naive;
                }
                worstCell = std::max(worstCell, cell);
            }
            const double rate = double(significant) / pairs, naiveRate = double(naive) / pairs;
            qInfo("phi %.2f: %d pairs, significant %.2f %% (worst length %.1f %%); plain Pearson "
                  "over frames %.1f %%",
                  phi, pairs, 100 * rate, 100.0 * worstCell / kPairsPerCell, 100 * naiveRate);
            QVERIFY2(
                rate <= 0.05,
                qPrintable(QStringLiteral("phi %1: %2 % significant").arg(phi).arg(100 * rate)));
            // The plain test must fail these series once they are autocorrelated (its rate at
            // phi 0.5 is about 11 %, at 0.9 about 43 %), or the set proves nothing.
            if (phi >= 0.5) QVERIFY(naiveRate > 0.10);
            total += pairs;
            totalSignificant += significant;
            totalNaive += naive;
        }
        qInfo("overall: %d pairs, significant %.2f %%; plain Pearson over frames %.1f %%", total,
              100.0 * totalSignificant / total, 100.0 * totalNaive / total);
        QVERIFY(double(totalSignificant) / total <= 0.05);
    }

    void driftingSeries()
    {
        // Random walks (phi = 1) and shared linear drifts with independent noise: the values
        // correlate strongly, their changes do not. No more than 5 % of 1000 pairs may be
        // called significant.
        Normal z(7);
        int walks = 0, drifts = 0;
        for (int k = 0; k < 500; ++k) {
            const int n = 20 + 10 * (k % 49);
            std::vector<double> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
            double u = 0, v = 0;
            for (int i = 0; i < n; ++i) {
                u += z();
                v += z();
                a[size_t(i)] = u;
                b[size_t(i)] = v;
            }
            if (correlate(a, b).q < 0.05) ++walks;
            for (int i = 0; i < n; ++i) {
                a[size_t(i)] = 0.1 * i + z();
                b[size_t(i)] = 0.1 * i + z();
            }
            if (correlate(a, b).q < 0.05) ++drifts;
        }
        qInfo("random walks: %d of 500 significant; shared drift: %d of 500", walks, drifts);
        QVERIFY(walks <= 25);
        QVERIFY(drifts <= 25);
    }

    void manyPairsOfOneReport()
    {
        // 96 unrelated pairs of 48 frames, strongly autocorrelated (phi 0.9), as one report
        // tests them: after Benjamini-Hochberg over the 96, expected significant pairs are
        // about 0.05 x (the chance that any is) < 1. Allow 2, where the plain test called 74.
        Normal z(96);
        std::vector<Correlation> pairs;
        for (int k = 0; k < 96; ++k)
            pairs.push_back(correlate(ar1(z, 48, 0.9), ar1(z, 48, 0.9)));
        fs::analysis::adjustForMultipleTests(pairs);
        int significant = 0;
        for (const Correlation& c : pairs)
            significant += c.q < fs::analysis::kSignificanceLevel;
        qInfo("one report of 96 unrelated pairs: %d significant", significant);
        QVERIFY(significant <= 2);
    }

    void sharedSignalIsFound_data()
    {
        QTest::addColumn<int>("lag");
        QTest::addColumn<int>("n");
        QTest::addColumn<double>("minimumPower");
        // A shared AR(1) signal s (phi 0.5) under independent AR(1) noise (phi 0.9) of equal
        // variance per step: x_t = s_t + u_t, y_t = s_(t-lag) + w_t (the allocator figure
        // leading by lag frames). The bounds are below the measured power (0.96-0.98 at 48
        // frames, 1.00 at 100) by a margin for the seed.
        QTest::newRow("lag 0, 48 frames") << 0 << 48 << 0.85;
        QTest::newRow("lag 1, 48 frames") << 1 << 48 << 0.85;
        QTest::newRow("lag 0, 100 frames") << 0 << 100 << 0.97;
        QTest::newRow("lag 1, 100 frames") << 1 << 100 << 0.97;
    }

    void sharedSignalIsFound()
    {
        QFETCH(int, lag);
        QFETCH(int, n);
        QFETCH(double, minimumPower);
        Normal z(1000 + 10 * lag + n);
        int found = 0, lagRight = 0;
        constexpr int kTrials = 400;
        for (int k = 0; k < kTrials; ++k) {
            const std::vector<double> s = ar1(z, n + 1, 0.5), u = ar1(z, n, 0.9),
                                      w = ar1(z, n, 0.9);
            std::vector<double> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
            for (int i = 0; i < n; ++i) {
                x[size_t(i)] = s[size_t(i + 1)] + u[size_t(i)];
                y[size_t(i)] = s[size_t(i + 1 - lag)] + w[size_t(i)];
            }
            const Correlation c = correlate(x, y);
            if (c.q < 0.05) {
                ++found;
                // Named with its lag and its sign. (A lag-1 signal also leaves a weaker negative
                // correlation at lag 0, -(1 - 0.5) / 2 of the changes: found, named wrongly.)
                lagRight += c.lag == lag && c.changeR > 0;
            }
        }
        const double power = double(found) / kTrials;
        qInfo("shared signal, lag %d, %d frames: power %.3f (lag and sign right in %d of %d)", lag,
              n, power, lagRight, found);
        QVERIFY(power >= minimumPower);
        QVERIFY(lagRight >= found * 9 / 10);
    }
};

QTEST_GUILESS_MAIN(TstAnalysisCorrelation)
#include "tst_analysis_correlation.moc"
