//! `s3://BUCKET[/PREFIX]`, and the keys of objects beneath it.
//!
//! The rules:
//! 1. the scheme is `s3://`;
//! 2. the bucket is 1–255 characters from `[A-Za-z0-9._-]` (S3 itself is
//!    stricter; other stores differ, and the server has the last word);
//! 3. the prefix, optional, is `/`-separated segments from `[A-Za-z0-9._-]`,
//!    none empty, `.` or `..`; a trailing `/` is dropped;
//! 4. nothing else: no query, fragment, user or port.
//!
//! An object's key mirrors the local layout (DESIGN §1):
//! `PREFIX/objects/<aa>/<the other 62 hex digits>`.

use cairn_objects::ObjectHash;

use crate::S3Error;

/// A parsed `s3://` location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    pub(crate) bucket: String,
    /// Without leading or trailing `/`; empty for the bucket's root.
    pub(crate) prefix: String,
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

impl Location {
    pub(crate) fn parse(url: &str) -> Result<Location, S3Error> {
        let bad = |reason: &str| S3Error::BadUrl {
            url: url.chars().take(300).collect(),
            reason: reason.to_owned(),
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("it does not start with s3://"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("it names no bucket"));
        }
        if bucket.len() > 255 || !bucket.chars().all(allowed) {
            return Err(bad(
                "a bucket name is letters, digits, `.`, `_` and `-` (at most 255)",
            ));
        }
        let given = prefix;
        let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        if prefix.is_empty() && !given.is_empty() {
            return Err(bad("its prefix has an empty segment"));
        }
        if !prefix.is_empty() {
            for seg in prefix.split('/') {
                if seg.is_empty() || seg == "." || seg == ".." {
                    return Err(bad("its prefix has an empty, `.` or `..` segment"));
                }
                if !seg.chars().all(allowed) {
                    return Err(bad(
                        "its prefix is `/`-separated letters, digits, `.`, `_` and `-`",
                    ));
                }
            }
        }
        Ok(Location {
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        })
    }

    /// `s3://BUCKET/PREFIX`, as the user would write it.
    pub(crate) fn url(&self) -> String {
        match self.prefix.is_empty() {
            true => format!("s3://{}", self.bucket),
            false => format!("s3://{}/{}", self.bucket, self.prefix),
        }
    }

    /// `PREFIX/objects` (or `objects`).
    pub(crate) fn objects_dir(&self) -> String {
        match self.prefix.is_empty() {
            true => "objects".to_owned(),
            false => format!("{}/objects", self.prefix),
        }
    }

    /// The key of the object `hash`.
    pub(crate) fn key_of(&self, hash: &ObjectHash) -> String {
        let hex = hash.to_hex();
        format!("{}/{}/{}", self.objects_dir(), &hex[..2], &hex[2..])
    }

    /// The key of the file at `rel` (`/`-separated segments of
    /// `[A-Za-z0-9._-]`, none empty, `.` or `..`), `None` for any other.
    pub(crate) fn file_key(&self, rel: &str) -> Option<String> {
        let ok = !rel.is_empty()
            && rel.split('/').all(|seg| {
                !seg.is_empty() && seg != "." && seg != ".." && seg.chars().all(allowed)
            });
        ok.then(|| match self.prefix.is_empty() {
            true => format!("files/{rel}"),
            false => format!("{}/files/{rel}", self.prefix),
        })
    }

    /// The object a key names, `None` for anything else under the prefix.
    pub(crate) fn hash_of(&self, key: &str) -> Option<ObjectHash> {
        let rest = key.strip_prefix(&self.objects_dir())?.strip_prefix('/')?;
        let (fan, tail) = rest.split_once('/')?;
        if fan.len() != 2 || tail.len() != 62 {
            return None;
        }
        ObjectHash::parse(&format!("{fan}{tail}")).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_by_the_rules() {
        let ok = |u: &str, b: &str, p: &str| {
            assert_eq!(
                Location::parse(u).unwrap(),
                Location {
                    bucket: b.into(),
                    prefix: p.into()
                },
                "{u}"
            )
        };
        ok("s3://b", "b", "");
        ok("s3://b/", "b", "");
        ok("s3://my-bucket/team/cairn", "my-bucket", "team/cairn");
        ok("s3://my.bucket/a_b/c-d/", "my.bucket", "a_b/c-d");
        for bad in [
            "",
            "b/p",
            "https://b/p",
            "s3://",
            "s3:///p",
            "s3://b/a//c",
            "s3://b/../x",
            "s3://b/./x",
            "s3://b/a b",
            "s3://b/p?x=1",
            "s3://b/p#f",
            "s3://user@b/p",
            "s3://b:9000/p",
            "s3://b//",
        ] {
            let e = Location::parse(bad).unwrap_err();
            assert!(matches!(e, S3Error::BadUrl { .. }), "{bad}: {e}");
        }
    }

    #[test]
    fn keys_mirror_the_local_layout_and_parse_back() {
        let h = ObjectHash::of(b"abc");
        let hex = h.to_hex();
        let l = Location::parse("s3://b/p/q").unwrap();
        let key = l.key_of(&h);
        assert_eq!(key, format!("p/q/objects/{}/{}", &hex[..2], &hex[2..]));
        assert_eq!(l.hash_of(&key), Some(h));
        let root = Location::parse("s3://b").unwrap();
        assert_eq!(
            root.key_of(&h),
            format!("objects/{}/{}", &hex[..2], &hex[2..])
        );
        assert_eq!(root.hash_of(&root.key_of(&h)), Some(h));
        for foreign in [
            "p/q/objects/FORMAT".to_string(),
            format!("p/q/objects/{}{}", &hex[..2], &hex[2..]),
            format!("p/q/objects/{}/{}.tmp", &hex[..2], &hex[2..]),
            format!("p/q/objects/{}/{}", &hex[..3], &hex[3..]),
            format!("p/other/{}/{}", &hex[..2], &hex[2..]),
            format!("p/q/objects/{}/{}", &hex[..2], hex[2..].to_uppercase()),
        ] {
            assert_eq!(l.hash_of(&foreign), None, "{foreign}");
        }
    }
}
