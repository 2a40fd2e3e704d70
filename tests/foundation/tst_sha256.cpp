// SHA-256 against the FIPS 180-4 examples and `sha256sum`'s answer for a file.
#include "core/sha256.h"
#include "core/store/sqlite.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

using namespace fs;

class TstSha256 : public QObject
{
    Q_OBJECT
private slots:
    void knownAnswers_data()
    {
        QTest::addColumn<QByteArray>("input");
        QTest::addColumn<QString>("digest");
        QTest::newRow("empty")
            << QByteArray() << "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        QTest::newRow("abc") << QByteArray("abc")
                             << "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        // 56 bytes: the padding needs a second block.
        QTest::newRow("two blocks")
            << QByteArray("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
            << "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
        // One million 'a' (FIPS 180-2 appendix B.3).
        QTest::newRow("million")
            << QByteArray(1000000, 'a')
            << "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    }
    void knownAnswers()
    {
        QFETCH(QByteArray, input);
        QFETCH(QString, digest);
        Sha256 h;
        h.update(input.constData(), static_cast<size_t>(input.size()));
        QCOMPARE(QString::fromStdString(h.hex()), digest);
        // Fed in uneven pieces, the same digest.
        Sha256 p;
        for (qsizetype i = 0; i < input.size(); i += 7)
            p.update(input.constData() + i,
                     static_cast<size_t>(std::min<qsizetype>(7, input.size() - i)));
        QCOMPARE(QString::fromStdString(p.hex()), digest);
    }

    void file()
    {
        QTemporaryDir dir;
        const QString f = dir.filePath("abc.txt");
        QFile out(f);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write("abc");
        out.close();
        QCOMPARE(
            QString::fromStdString(sha256File(f.toStdString())),
            QStringLiteral("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
        try {
            sha256File(dir.filePath("missing").toStdString());
            QFAIL("no error for a missing file");
        } catch (const SessionError& e) {
            QVERIFY(QString(e.what()).contains("missing"));
        }
    }
};

QTEST_GUILESS_MAIN(TstSha256)
#include "tst_sha256.moc"
