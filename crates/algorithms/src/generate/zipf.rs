//! Zipf document-term matrices: rows of term counts for spherical K-means.

use rand_xoshiro::Xoshiro256PlusPlus;

use super::{below, item_rng, parse_field, spec_fields, unit_f64};

const DOMAIN_ZIPF_DOC: u64 = 0x5A49_5046_5F44_4F43; // "ZIPF_DOC"

/// A document-term matrix: `docs` rows over `terms` columns, each document a bag of words
/// whose terms follow Zipf's law with exponent 1.
///
/// Document `i` has `len` distinct terms, `len` uniform in `[avg / 2, avg * 3 / 2]`. Its words
/// are drawn one by one until `len` distinct terms appear: a word is term
/// `floor((terms + 1)^u) - 1` for `u` uniform in `[0, 1)` (the continuous Zipf law of exponent
/// 1, `P(term < t) = ln(t + 1) / ln(terms + 1)`), and a term's value is the number of times it
/// was drawn (its count in the document). Columns are increasing within a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZipfDocsSpec {
    /// Documents (rows, >= 1 when parsed, below 2^32).
    pub docs: u64,
    /// Vocabulary (columns, >= 2 when parsed, below 2^32).
    pub terms: u64,
    /// Average distinct terms a document (>= 1, at most a third of `terms`, when parsed).
    pub avg: u64,
    /// Seed of all random choices.
    pub seed: u64,
}

impl ZipfDocsSpec {
    /// Parses `zipf:DOCS:TERMS:AVG[:SEED]` (seed defaults to 1).
    pub fn parse(s: &str) -> Result<Self, String> {
        const USAGE: &str = "zipf:DOCS:TERMS:AVG[:SEED]";
        let fields = spec_fields(s, "zipf", USAGE)?;
        let (docs, terms, avg, seed) = match fields.as_slice() {
            [d, t, a] => (*d, *t, *a, None),
            [d, t, a, seed] => (*d, *t, *a, Some(*seed)),
            _ => return Err(format!("expected {USAGE}")),
        };
        let docs: u64 = parse_field(docs, "number of documents")?;
        if docs == 0 || docs > u64::from(u32::MAX) {
            return Err(format!(
                "number of documents must be 1..={}, got {docs}",
                u32::MAX
            ));
        }
        let terms: u64 = parse_field(terms, "number of terms")?;
        if !(2..=u64::from(u32::MAX)).contains(&terms) {
            return Err(format!(
                "number of terms must be 2..={}, got {terms}",
                u32::MAX
            ));
        }
        let avg: u64 = parse_field(avg, "average terms a document")?;
        if avg == 0 || avg.saturating_mul(3) > terms {
            return Err(format!(
                "average terms a document must be 1..={} (a third of the terms), got {avg}",
                terms / 3
            ));
        }
        let seed = match seed {
            Some(seed) => parse_field(seed, "seed")?,
            None => 1,
        };
        Ok(ZipfDocsSpec {
            docs,
            terms,
            avg,
            seed,
        })
    }

    /// The most distinct terms a document has.
    pub fn max_len(&self) -> u64 {
        self.avg + self.avg / 2
    }

    /// The distinct terms of document `doc`: its row's non-zeros.
    pub fn doc_len(&self, doc: u64) -> u64 {
        self.draw_len(&mut item_rng(self.seed, DOMAIN_ZIPF_DOC, doc))
    }

    /// The first draw of a document's stream: its length.
    fn draw_len(&self, rng: &mut Xoshiro256PlusPlus) -> u64 {
        self.avg / 2 + below(rng, self.max_len() - self.avg / 2 + 1)
    }

    /// Appends document `doc` (below `docs`) to `cols` (increasing) and `vals` (counts);
    /// `words` is scratch space.
    pub fn document(
        &self,
        doc: u64,
        words: &mut Vec<u32>,
        cols: &mut Vec<u32>,
        vals: &mut Vec<f64>,
    ) {
        let mut rng = item_rng(self.seed, DOMAIN_ZIPF_DOC, doc);
        let len = self.draw_len(&mut rng) as usize;
        let log_terms = ((self.terms + 1) as f64).ln();
        let last = (self.terms - 1) as u32;
        words.clear();
        let mut distinct = 0;
        while distinct < len {
            for _ in distinct..len {
                let t = (unit_f64(&mut rng) * log_terms).exp() as u64;
                words.push((t.saturating_sub(1) as u32).min(last));
            }
            words.sort_unstable();
            distinct = 1 + words.windows(2).filter(|w| w[0] != w[1]).count();
        }
        let mut i = 0;
        while i < words.len() {
            let mut j = i + 1;
            while j < words.len() && words[j] == words[i] {
                j += 1;
            }
            cols.push(words[i]);
            vals.push((j - i) as f64);
            i = j;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_parse() {
        assert_eq!(
            ZipfDocsSpec::parse("zipf:1000:300:10"),
            Ok(ZipfDocsSpec {
                docs: 1000,
                terms: 300,
                avg: 10,
                seed: 1
            })
        );
        assert_eq!(ZipfDocsSpec::parse("zipf:5:30:10:9").map(|s| s.seed), Ok(9));
        for bad in [
            "zipf:0:300:10",
            "zipf:10:1:1",
            "zipf:10:300:0",
            "zipf:10:300:101",
            "zipf:10:300",
            "zipf:4294967296:300:10",
            "zipf:10:x:1",
            "rmat:10:300:10",
        ] {
            assert!(ZipfDocsSpec::parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn zipf_documents_have_their_length_and_sorted_counts() {
        let spec = ZipfDocsSpec::parse("zipf:2000:5000:40:3").expect("parse");
        let (mut words, mut term_hits) = (Vec::new(), vec![0u64; 5000]);
        let mut total_len = 0;
        for doc in 0..spec.docs {
            let (mut cols, mut vals) = (Vec::new(), Vec::new());
            spec.document(doc, &mut words, &mut cols, &mut vals);
            assert!((20..=60).contains(&cols.len()), "doc {doc}: {}", cols.len());
            assert_eq!(cols.len() as u64, spec.doc_len(doc));
            assert!(
                cols.windows(2).all(|w| w[0] < w[1]),
                "doc {doc} not increasing"
            );
            assert_eq!(vals.iter().sum::<f64>() as usize, words.len());
            assert!(vals.iter().all(|&v| v >= 1.0 && v.fract() == 0.0));
            total_len += cols.len();
            for &c in &cols {
                term_hits[c as usize] += 1;
            }
            let (mut again_c, mut again_v) = (Vec::new(), Vec::new());
            spec.document(doc, &mut words, &mut again_c, &mut again_v);
            assert_eq!(
                (cols, vals),
                (again_c, again_v),
                "doc {doc} is not reproducible"
            );
        }
        let mean = total_len as f64 / spec.docs as f64;
        assert!((mean - 40.0).abs() < 1.0, "mean length {mean}");
        // Zipf: the first term is in nearly every document, a middle one in few, and document
        // frequency falls with the rank of the term.
        assert!(term_hits[0] > 1900, "{}", term_hits[0]);
        assert!(term_hits[2500] < 20, "{}", term_hits[2500]);
        let head: u64 = term_hits[10..20].iter().sum();
        let tail: u64 = term_hits[1000..1010].iter().sum();
        assert!(head > 20 * tail, "head {head} tail {tail}");
    }
}
