//! A client certificate's subject, written as Kafka's default principal
//! builder names an SSL client: `X500Principal.getName()`, i.e. RFC 2253
//! (`CN=alice,OU=eng,O=Example,C=US`: the last RDN of the certificate
//! first, known attribute types by keyword, others as a dotted OID with
//! the value's DER in hex).
//!
//! Only the walk to the subject is parsed here, on a byte cursor, every
//! length checked against what is left: rustls has already verified the
//! certificate's signature chain before anyone asks for its subject.

/// Reads the subject DN of a DER certificate.
pub fn subject_dn(cert: &[u8]) -> Result<String, String> {
    let (certificate, _) = element(cert, SEQUENCE)?;
    let (mut tbs, _) = element(certificate, SEQUENCE)?;
    if tbs.first() == Some(&0xa0) {
        tbs = element(tbs, 0xa0)?.1; // [0] version
    }
    for skipped in [INTEGER, SEQUENCE, SEQUENCE, SEQUENCE] {
        tbs = element(tbs, skipped)?.1; // serial, signature, issuer, validity
    }
    let (mut name, _) = element(tbs, SEQUENCE)?;
    let mut rdns = Vec::new();
    while !name.is_empty() {
        let (mut set, rest) = element(name, SET)?;
        name = rest;
        let mut avas = Vec::new();
        while !set.is_empty() {
            let (ava, rest) = element(set, SEQUENCE)?;
            set = rest;
            avas.push(attribute(ava)?);
        }
        rdns.push(avas.join("+"));
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

const INTEGER: u8 = 0x02;
const OID: u8 = 0x06;
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;

/// One TLV with tag `tag` at the start of `der`: (its contents, what follows).
fn element(der: &[u8], tag: u8) -> Result<(&[u8], &[u8]), String> {
    let tlv = any_element(der)?;
    match der.first() {
        Some(&t) if t == tag => Ok((tlv.contents, tlv.rest)),
        found => Err(format!("certificate subject: expected DER tag {tag:#04x}, found {found:02x?}")),
    }
}

/// One DER element and what follows it.
struct Tlv<'a> {
    contents: &'a [u8],
    rest: &'a [u8],
    whole: &'a [u8],
}

/// Any TLV at the start of `der`.
fn any_element(der: &[u8]) -> Result<Tlv<'_>, String> {
    let truncated = || "certificate subject: truncated DER".to_string();
    let first = *der.get(1).ok_or_else(truncated)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return Err(format!("certificate subject: DER length of {n} bytes"));
        }
        let bytes = der.get(2..2 + n).ok_or_else(truncated)?;
        (bytes.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b)), 2 + n)
    };
    let end = header.checked_add(len).filter(|&e| e <= der.len()).ok_or_else(truncated)?;
    Ok(Tlv { contents: &der[header..end], rest: &der[end..], whole: &der[..end] })
}

/// `TYPE=value` of one AttributeTypeAndValue.
fn attribute(ava: &[u8]) -> Result<String, String> {
    let (oid, rest) = element(ava, OID)?;
    let Tlv { contents: value, whole, .. } = any_element(rest)?;
    let oid = dotted(oid);
    let keyword = match oid.as_str() {
        "2.5.4.3" => Some("CN"),
        "2.5.4.6" => Some("C"),
        "2.5.4.7" => Some("L"),
        "2.5.4.8" => Some("ST"),
        "2.5.4.9" => Some("STREET"),
        "2.5.4.10" => Some("O"),
        "2.5.4.11" => Some("OU"),
        "0.9.2342.19200300.100.1.25" => Some("DC"),
        "0.9.2342.19200300.100.1.1" => Some("UID"),
        _ => None,
    };
    let text = match rest.first() {
        Some(0x0c | 0x13 | 0x16) => std::str::from_utf8(value).ok().map(str::to_string),
        Some(0x14) => Some(value.iter().map(|&b| char::from(b)).collect()),
        Some(0x1e) => {
            let units: Vec<u16> = value.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    };
    Ok(match (keyword, text) {
        (Some(k), Some(t)) => format!("{k}={}", escape(&t)),
        (k, _) => {
            let hex: String = whole.iter().map(|b| format!("{b:02x}")).collect();
            format!("{}=#{hex}", k.map_or(oid, str::to_string))
        }
    })
}

fn dotted(oid: &[u8]) -> String {
    let mut parts: Vec<u64> = Vec::new();
    let mut acc = 0u64;
    for &b in oid {
        acc = (acc << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if parts.is_empty() {
                let first = (acc / 40).min(2);
                parts.extend([first, acc - first * 40]);
            } else {
                parts.push(acc);
            }
            acc = 0;
        }
    }
    parts.iter().map(u64::to_string).collect::<Vec<_>>().join(".")
}

/// RFC 2253's escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if contents.len() < 0x80 {
            out.push(contents.len() as u8);
        } else {
            out.extend([0x82, (contents.len() >> 8) as u8, contents.len() as u8]);
        }
        out.extend_from_slice(contents);
        out
    }

    fn rdn(oid: &[u8], tag: u8, value: &str) -> Vec<u8> {
        tlv(SET, &tlv(SEQUENCE, &[tlv(OID, oid), tlv(tag, value.as_bytes())].concat()))
    }

    #[test]
    fn the_subject_reads_as_kafka_writes_it() {
        let subject = [
            rdn(&[0x55, 0x04, 0x06], 0x13, "US"),
            rdn(&[0x55, 0x04, 0x0a], 0x0c, "Example, Inc"),
            rdn(&[0x55, 0x04, 0x0b], 0x0c, "eng"),
            rdn(&[0x55, 0x04, 0x03], 0x0c, "alice"),
        ]
        .concat();
        let tbs = [
            tlv(0xa0, &tlv(INTEGER, &[2])),
            tlv(INTEGER, &[1, 2, 3]),
            tlv(SEQUENCE, &[]),
            tlv(SEQUENCE, &[]),
            tlv(SEQUENCE, &[]),
            tlv(SEQUENCE, &subject),
            tlv(SEQUENCE, &[0; 300]),
        ]
        .concat();
        let cert = tlv(SEQUENCE, &[tlv(SEQUENCE, &tbs), tlv(SEQUENCE, &[])].concat());
        assert_eq!(subject_dn(&cert).unwrap(), "CN=alice,OU=eng,O=Example\\, Inc,C=US");
        assert!(subject_dn(&cert[..40]).is_err());
        assert!(subject_dn(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert_eq!(dotted(&[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19]), "0.9.2342.19200300.100.1.25");
    }
}
