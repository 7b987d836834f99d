//! Rendering of string values: URLs (Latin, `http://domain/w/w/w-pad...`) and texts (Cyrillic
//! words: titles, search phrases).
//!
//! A value is named by an integer `g` (its pool and index, see `model`). Its first `width`
//! words are the base-1024 digits of `permute(g)`, so distinct values give distinct strings;
//! further words are padding drawn from a hash of `g`, up to the value's target length in
//! bytes, which is met exactly when it is not below the length of the digit words.
//!
//! ```text
//!   URL:  http://<domain>/<d0>/<d1>/<d2>[-<pad>]...[_<digits>]     d_i, pad: 4 Latin letters
//!   text: <d0> <d1> <d2>[ <pad>]...[ <latin filler>]                d_i, pad: Cyrillic words
//! ```
//!
//! Head (hot) values have their own shorter forms (a domain root, one or two words) that no
//! pool value can take. Latin words are consonant-vowel syllables, so no generated word
//! contains "google" (`oo` never occurs); Q21's `LIKE '%google%'` only matches the URLs the
//! generator puts on the `google.ru` domain on purpose.

use std::sync::LazyLock;

use crate::rng::{below, rehash};

/// Words per digit alphabet: 1024 = 10 bits per word.
pub(crate) const WORD_BITS: u32 = 10;
const WORDS: usize = 1 << WORD_BITS;

/// Consonant-vowel syllables of Latin words (32 = 5 bits).
const LATIN_SYLLABLES: [&str; 32] = [
    "ba", "be", "bi", "bo", "da", "de", "di", "do", "ka", "ke", "ki", "ko", "la", "le", "li", "lo",
    "ma", "me", "mi", "mo", "na", "ne", "ni", "no", "ra", "re", "ri", "ro", "sa", "se", "ti", "vo",
];

/// Syllables of Cyrillic words: 24 consonant-vowel (4 bytes) and 8 vowels (2 bytes), so a
/// word has 4 to 8 bytes and parses back uniquely (a consonant always takes the next vowel).
const CYRILLIC_SYLLABLES: [&str; 32] = [
    "ба", "ва", "га", "да", "за", "ка", "ла", "ма", "на", "па", "ра", "са", "та", "ко", "ло", "мо",
    "но", "ро", "ти", "ми", "ни", "ле", "ре", "ше", "а", "о", "и", "е", "у", "я", "ы", "ю",
];

/// Sites of URLs and referers (no "google": see the module docs).
pub(crate) const DOMAINS: [&str; 48] = [
    "kinopoisk.ru",
    "mail.ru",
    "yandex.ru",
    "vk.com",
    "avito.ru",
    "auto.ru",
    "rambler.ru",
    "livejournal.com",
    "odnoklassniki.ru",
    "irr.ru",
    "rutracker.org",
    "afisha.ru",
    "lenta.ru",
    "rbc.ru",
    "gismeteo.ru",
    "kp.ru",
    "drom.ru",
    "hh.ru",
    "ria.ru",
    "ozon.ru",
    "liveinternet.ru",
    "sports.ru",
    "championat.com",
    "woman.ru",
    "kinozal.tv",
    "pikabu.ru",
    "fishki.net",
    "ivi.ru",
    "tvigle.ru",
    "megogo.net",
    "rutube.ru",
    "smotri.com",
    "mamba.ru",
    "loveplanet.ru",
    "2gis.ru",
    "wildberries.ru",
    "lamoda.ru",
    "e1.ru",
    "ngs.ru",
    "74.ru",
    "fontanka.ru",
    "bash.im",
    "photosight.ru",
    "yaplakal.com",
    "ucoz.ru",
    "narod.ru",
    "wikipedia.org",
    "bing.com",
];

/// The one domain whose URLs match Q21's `URL LIKE '%google%'`.
pub(crate) const GOOGLE_DOMAIN: &str = "google.ru";

/// Site names appended to head titles.
const BRANDS: [&str; 8] = [
    "Яндекс",
    "Mail.Ru",
    "ВКонтакте",
    "Одноклассники",
    "Авито",
    "КиноПоиск",
    "Рамблер",
    "LiveJournal",
];

/// The 1024 Latin words (4 ASCII letters each) and 1024 Cyrillic words.
struct Vocabulary {
    latin: Vec<String>,
    cyrillic: Vec<String>,
}

static VOCABULARY: LazyLock<Vocabulary> = LazyLock::new(|| {
    let words = |syl: &[&str; 32]| -> Vec<String> {
        (0..WORDS)
            .map(|d| format!("{}{}", syl[d & 31], syl[d >> 5]))
            .collect()
    };
    Vocabulary {
        latin: words(&LATIN_SYLLABLES),
        cyrillic: words(&CYRILLIC_SYLLABLES),
    }
});

/// How a pool value looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Style {
    /// `http://domain/...` with Latin words.
    Url,
    /// Cyrillic words separated by spaces (titles, search phrases).
    Text,
}

/// Shared parameters of one rendered value.
#[derive(Debug)]
pub(crate) struct Render {
    /// The look of the value.
    pub(crate) style: Style,
    /// Words holding the digits of the value's id (`width * 10` bits).
    pub(crate) width: u32,
    /// Key of the digit permutation (differs per column, so columns do not share strings).
    pub(crate) key: u64,
    /// One special value in this many URLs is on [`GOOGLE_DOMAIN`] (0: never).
    pub(crate) google_one_in: u64,
    /// One special value in this many texts gets the word "Google" (0: never).
    pub(crate) google_word_one_in: u64,
}

impl Render {
    /// Appends value `g` (an injective id) of `target_len` bytes to `out`; `h` is a hash of
    /// `g` that picks the domain and the padding words.
    /// Only values with `special` set may get the google domain or word.
    pub(crate) fn render(
        &self,
        g: u64,
        h: u64,
        target_len: usize,
        special: bool,
        out: &mut Vec<u8>,
    ) {
        let voc = &*VOCABULARY;
        let start = out.len();
        let digits = crate::rng::permute(g, self.key, self.width * WORD_BITS);
        let digit = |i: u32| ((digits >> (i * WORD_BITS)) as usize) & (WORDS - 1);
        let mut pad = rehash(h, 0x005E_ED0F_0AD5);
        match self.style {
            Style::Url => {
                out.extend_from_slice(b"http://");
                let google = special && self.google_one_in > 0 && below(h, self.google_one_in) == 0;
                let domain = if google {
                    GOOGLE_DOMAIN
                } else {
                    DOMAINS[below(rehash(h, 0xD0), DOMAINS.len() as u64) as usize]
                };
                out.extend_from_slice(domain.as_bytes());
                for i in 0..self.width {
                    out.push(b'/');
                    out.extend_from_slice(voc.latin[digit(i)].as_bytes());
                }
                while out.len() - start + 5 <= target_len {
                    out.push(if pad & 3 == 0 { b'/' } else { b'-' });
                    out.extend_from_slice(voc.latin[(pad >> 8) as usize & (WORDS - 1)].as_bytes());
                    pad = rehash(pad, 1);
                }
                let rest = target_len.saturating_sub(out.len() - start);
                if rest > 0 {
                    out.push(b'_');
                    for k in 1..rest {
                        out.push(b'0' + ((pad >> (k % 60)) & 7) as u8);
                    }
                }
            }
            Style::Text => {
                for i in 0..self.width {
                    if i > 0 {
                        out.push(b' ');
                    }
                    out.extend_from_slice(voc.cyrillic[digit(i)].as_bytes());
                }
                if special
                    && self.google_word_one_in > 0
                    && below(h, self.google_word_one_in) == 0
                    && out.len() - start + 7 <= target_len
                {
                    out.extend_from_slice(b" Google");
                }
                loop {
                    let w = voc.cyrillic[(pad >> 8) as usize & (WORDS - 1)].as_bytes();
                    if out.len() - start + 1 + w.len() > target_len {
                        break;
                    }
                    out.push(b' ');
                    out.extend_from_slice(w);
                    pad = rehash(pad, 1);
                }
                let rest = target_len.saturating_sub(out.len() - start);
                if rest == 1 {
                    out.push(b's');
                } else if rest > 1 {
                    // Latin filler to the exact length: ' ' then consonant-vowel letters.
                    out.push(b' ');
                    for k in 1..rest {
                        let syl = LATIN_SYLLABLES[((pad >> (5 * (k / 2) % 55)) & 31) as usize];
                        out.push(syl.as_bytes()[(k - 1) % 2]);
                    }
                }
            }
        }
    }
}

/// Head (hot) URL of rank `k` (`k < 48 * 1024`): a site root or one short section.
pub(crate) fn head_url(k: usize) -> String {
    let d = DOMAINS[k % DOMAINS.len()];
    match k / DOMAINS.len() {
        0 => format!("http://{d}/"),
        w => format!("http://{d}/{}/", VOCABULARY.latin[w % WORDS]),
    }
}

/// Head referer of rank `k`: like [`head_url`] with another site order and `.html` pages.
pub(crate) fn head_referer(k: usize) -> String {
    let d = DOMAINS[(k + 2) % DOMAINS.len()];
    match k / DOMAINS.len() {
        0 => format!("http://{d}/"),
        w => format!("http://{d}/{}.html", VOCABULARY.latin[w % WORDS]),
    }
}

/// Head title of rank `k` (`k < 1024`): one or two words, then " - " and a site name.
pub(crate) fn head_title(k: usize) -> String {
    let voc = &*VOCABULARY;
    let mut s = voc.cyrillic[k % WORDS].clone();
    if !k.is_multiple_of(3) {
        s.push(' ');
        s.push_str(&voc.cyrillic[(k * 389 + 1) % WORDS]);
    }
    s.push_str(" - ");
    s.push_str(BRANDS[k % BRANDS.len()]);
    s
}

/// Head search phrase of rank `k` (`k < 1024`): one or two words.
pub(crate) fn head_phrase(k: usize) -> String {
    let voc = &*VOCABULARY;
    let mut s = voc.cyrillic[k % WORDS].clone();
    if k % 2 == 1 {
        s.push(' ');
        s.push_str(&voc.cyrillic[(k * 613 + 5) % WORDS]);
    }
    s
}

/// Length in bytes of the digit words alone (the shortest a pool value can be) averaged
/// over all digits: used by the calibration to keep target lengths reachable.
pub(crate) fn min_pool_len(style: Style, width: u32) -> f64 {
    let voc = &*VOCABULARY;
    let w = width as f64;
    match style {
        Style::Url => {
            let dom: f64 =
                DOMAINS.iter().map(|d| d.len() as f64).sum::<f64>() / DOMAINS.len() as f64;
            7.0 + dom + 5.0 * w
        }
        Style::Text => {
            let avg: f64 = voc.cyrillic.iter().map(|s| s.len() as f64).sum::<f64>() / WORDS as f64;
            w * avg + (w - 1.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn render(style: Style, g: u64, len: usize) -> String {
        let r = Render {
            style,
            width: 3,
            key: 99,
            google_one_in: 0,
            google_word_one_in: 0,
        };
        let mut out = Vec::new();
        r.render(g, crate::rng::mix64(g), len, true, &mut out);
        String::from_utf8(out).expect("valid UTF-8")
    }

    #[test]
    fn domains_are_all_used() {
        let r = Render {
            style: Style::Url,
            width: 3,
            key: 5,
            google_one_in: 0,
            google_word_one_in: 0,
        };
        let mut seen = HashSet::new();
        for g in 0..5_000u64 {
            let mut out = Vec::new();
            r.render(g, crate::rng::mix64(g), 60, false, &mut out);
            let url = String::from_utf8(out).unwrap();
            seen.insert(
                url["http://".len()..]
                    .split('/')
                    .next()
                    .unwrap()
                    .to_string(),
            );
        }
        assert_eq!(seen.len(), DOMAINS.len());
    }

    #[test]
    fn vocabulary_is_distinct_and_google_free() {
        let voc = &*VOCABULARY;
        assert_eq!(voc.latin.iter().collect::<HashSet<_>>().len(), WORDS);
        assert_eq!(voc.cyrillic.iter().collect::<HashSet<_>>().len(), WORDS);
        assert!(DOMAINS.iter().all(|d| !d.contains("google")));
    }

    #[test]
    fn lengths_are_exact_when_reachable() {
        for g in 0..2000u64 {
            for len in [40usize, 57, 88, 150, 301] {
                assert_eq!(render(Style::Url, g, len).len(), len, "url g={g} len={len}");
                assert_eq!(
                    render(Style::Text, g, len).len(),
                    len,
                    "text g={g} len={len}"
                );
            }
            // Below the digit words the value is just the digit words.
            assert!(render(Style::Text, g, 1).split(' ').count() == 3);
            let t = render(Style::Text, g, 30 + (g % 7) as usize);
            assert!(!t.ends_with(' ') && !t.contains("  "), "{t:?}");
        }
    }

    #[test]
    fn distinct_ids_give_distinct_strings() {
        for style in [Style::Url, Style::Text] {
            let set: HashSet<String> = (0..50_000u64).map(|g| render(style, g, 1)).collect();
            assert_eq!(set.len(), 50_000);
        }
        let heads: HashSet<String> = (0..1000).map(head_title).collect();
        assert_eq!(heads.len(), 1000);
        let heads: HashSet<String> = (0..1000).map(head_phrase).collect();
        assert_eq!(heads.len(), 1000);
        let heads: HashSet<String> = (0..1000).map(head_url).collect();
        assert_eq!(heads.len(), 1000);
        let heads: HashSet<String> = (0..1000).map(head_referer).collect();
        assert_eq!(heads.len(), 1000);
    }
}
