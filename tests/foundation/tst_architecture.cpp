// docs/architecture.md kept true: every file its recipes name exists, its importer table is
// exactly the importers `makeImporter` builds, its metric table exactly the video-metric registry
// (names, units, directions, in the registry's order). The panels: tst_gui (everyPanelIsListed).
#include "core/analysis/video_metric_registry.h"
#include "core/import/importer.h"

#include <QTest>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using namespace fs;

namespace {

const std::filesystem::path kSource = FRAGSCOPE_SOURCE_DIR;

std::string readDoc()
{
    std::ifstream in(kSource / "docs" / "architecture.md");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The text of the section under `heading` ("## Add an importer"), up to the next "## ".
std::string section(const std::string& doc, const std::string& heading)
{
    const size_t a = doc.find(heading + "\n");
    if (a == std::string::npos) return {};
    const size_t b = doc.find("\n## ", a + heading.size());
    return doc.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

// The cells of a section's table rows whose first cell is `code`, as written (backticks off).
std::vector<std::vector<std::string>> tableRows(const std::string& text)
{
    std::vector<std::vector<std::string>> rows;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (!line.starts_with("| `")) continue;
        std::vector<std::string> cells;
        std::istringstream cellsIn(line.substr(1));
        for (std::string cell; std::getline(cellsIn, cell, '|');) {
            const auto first = cell.find_first_not_of(" `");
            const auto last = cell.find_last_not_of(" `");
            if (first != std::string::npos) cells.push_back(cell.substr(first, last - first + 1));
        }
        rows.push_back(cells);
    }
    return rows;
}

} // namespace

class TstArchitecture : public QObject
{
    Q_OBJECT
private slots:
    void docHasTheThreeRecipes()
    {
        const std::string doc = readDoc();
        QVERIFY2(!doc.empty(), "docs/architecture.md is missing");
        for (const char* h :
             {"## Add an importer", "## Add a per-frame video metric", "## Add a GUI panel"})
            QVERIFY2(!section(doc, h).empty(), h);
    }

    // Every `path/with/slashes` the recipes name (a file or a folder of the tree) and every
    // linked document exists.
    void everyNamedFileExists()
    {
        const std::string doc = readDoc();
        const std::regex code(
            R"(`((?:core|app|views|tests|docs|capture|bench)/[A-Za-z0-9_./-]+)`)");
        int named = 0;
        for (auto it = std::sregex_iterator(doc.begin(), doc.end(), code);
             it != std::sregex_iterator(); ++it) {
            const std::string p = (*it)[1];
            ++named;
            QVERIFY2(std::filesystem::exists(kSource / p), p.c_str());
        }
        QVERIFY(named >= 20); // the recipes name files at every step
        const std::regex link(R"(\]\(([A-Za-z0-9_./-]+\.md)\))");
        for (auto it = std::sregex_iterator(doc.begin(), doc.end(), link);
             it != std::sregex_iterator(); ++it) {
            const std::string p = (*it)[1];
            QVERIFY2(std::filesystem::exists(kSource / "docs" / p), p.c_str());
        }
    }

    // The importer table: pytorch-snapshot, kineto, nsys-sqlite, each a --format name that
    // parses back to its Format, whose importer makeImporter builds (no file is read before
    // prepare()), and whose maker importer.h declares. Format values from 1 up until formatName
    // says "?" are every importer the code has: 3, as many as the table's rows.
    void importerTableIsTheCodes()
    {
        const std::string text = section(readDoc(), "## Add an importer");
        std::ifstream h(kSource / "core/import/importer.h");
        std::stringstream header;
        header << h.rdbuf();
        const auto rows = tableRows(text);
        std::vector<std::string> documented;
        for (const auto& row : rows) {
            QCOMPARE(row.size(), size_t{3});
            documented.push_back(row[0]);
            import::Format f = import::Format::Auto;
            QVERIFY2(import::parseFormat(row[0], f), row[0].c_str());
            QVERIFY(f != import::Format::Auto);
            QCOMPARE(std::string(import::formatName(f)), row[0]);
            const auto imp = import::makeImporter(f, "/nonexistent/input");
            QVERIFY(imp);
            QCOMPARE(imp->format(), f);
            QVERIFY2(header.str().find(row[1] + "(") != std::string::npos, row[1].c_str());
            QVERIFY2(std::filesystem::exists(kSource / row[2]), row[2].c_str());
        }
        std::vector<std::string> code;
        for (int i = 1; import::formatName(static_cast<import::Format>(i)) != "?"; ++i)
            code.emplace_back(import::formatName(static_cast<import::Format>(i)));
        QCOMPARE(documented, code);
        QCOMPARE(code.size(), size_t{3});
    }

    // The metric table: flow_l2_px px higher, warp_error 0..255 higher, flicker 0..255 higher,
    // ssim_prev 0..1 lower, in the registry's order; each found by name.
    void metricTableIsTheRegistry()
    {
        const auto rows = tableRows(section(readDoc(), "## Add a per-frame video metric"));
        const auto metrics = analysis::videoMetrics();
        QCOMPARE(rows.size(), metrics.size());
        for (size_t i = 0; i < rows.size(); ++i) {
            QCOMPARE(rows[i].size(), size_t{3});
            const analysis::VideoMetric* m = analysis::findVideoMetric(rows[i][0]);
            QVERIFY2(m, rows[i][0].c_str());
            QCOMPARE(m, &metrics[i]);
            QCOMPARE(rows[i][1], std::string(m->unit));
            QCOMPARE(rows[i][2], std::string(m->higherIsWorse ? "higher" : "lower"));
        }
        QCOMPARE(rows.size(), size_t{4});
    }
};

QTEST_GUILESS_MAIN(TstArchitecture)
#include "tst_architecture.moc"
