//! Exact money: amounts in pico-dollars, prices in micro-dollars per million
//! tokens.
//!
//! Why integers: a run's cost is the sum of thousands of products of token
//! counts and per-token prices. In binary floating point `0.1 + 0.2 !=
//! 0.3`, so a total computed with `f64` drifts with the order of the sum
//! and a budget check `spent <= budget` can flip on the last bit. With
//! integers every product and sum is exact, the same inputs give the same
//! bytes, and the ledger's invariant is a plain integer comparison.
//!
//! Why these units: a price of one micro-dollar per million tokens is one
//! pico-dollar per token, so `tokens × rate` is already an amount in
//! pico-dollars — no division, no rounding, ever. A [`Rate`] is a `u64`
//! and a token count is a `u64`, so their product always fits a `u128`.
//! Every published price in LiteLLM's table is a whole number of
//! micro-dollars per million tokens (the few that are not are binary noise
//! such as `2.9999900000000002e-06`, which rounds to the intended figure).
//!
//! Amounts saturate at `u128::MAX` pico-dollars (about 3.4 × 10²⁶ dollars)
//! instead of overflowing; saturation only ever moves a figure up, so an
//! upper bound stays an upper bound and a budget check stays on the safe
//! side.
//!
//! Why in ctx-model: a plan's `config.prices` ([`PlanPrices`]) and a
//! result's `cost_usd` are written in these units, so the plan model and
//! everything that reads a plan or a stored result speak them. Pricing
//! (price tables, cost ranges, the `--max-cost` ledger) stays in ctx-cost,
//! which re-exports this module as `ctx_cost::money`.

use std::collections::BTreeMap;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// Pico-dollars in one dollar.
const PICOS_PER_DOLLAR: u128 = 1_000_000_000_000;
/// Decimal places of a dollar amount ([`Usd`]).
const USD_DECIMALS: u32 = 12;
/// Decimal places of a price in dollars per million tokens ([`Rate`]).
const RATE_DECIMALS: u32 = 6;

/// An exact amount of US dollars, held in pico-dollars (10⁻¹² USD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Usd(u128);

impl Usd {
    /// Zero dollars.
    pub const ZERO: Usd = Usd(0);

    /// One dollar.
    pub const ONE_DOLLAR: Usd = Usd(PICOS_PER_DOLLAR);

    /// An amount from a count of pico-dollars.
    pub const fn from_picos(picos: u128) -> Usd {
        Usd(picos)
    }

    /// The amount in pico-dollars.
    pub const fn picos(self) -> u128 {
        self.0
    }

    /// Parses a dollar amount written as a decimal (`5`, `0.25`, `12.5`),
    /// or with an exponent as ctx's JSON prints small amounts (`1.62e-5`),
    /// exactly: decimal digits, never an `f64`. At most 12 decimal places
    /// once the exponent has moved the point; no sign.
    pub fn parse(text: &str) -> Result<Usd, DecimalError> {
        parse_decimal(text, USD_DECIMALS, Rounding::Exact).map(Usd)
    }

    /// `self + other`, saturating at the largest amount.
    #[must_use]
    pub const fn saturating_add(self, other: Usd) -> Usd {
        Usd(self.0.saturating_add(other.0))
    }

    /// `self - other`, or zero when `other` is larger.
    #[must_use]
    pub const fn saturating_sub(self, other: Usd) -> Usd {
        Usd(self.0.saturating_sub(other.0))
    }

    /// `self × n`, saturating at the largest amount.
    #[must_use]
    pub const fn saturating_mul(self, n: u64) -> Usd {
        Usd(self.0.saturating_mul(n as u128))
    }

    /// The amount an `f64` holds, as [`Usd`]'s `Deserialize` reads a JSON
    /// number: its shortest decimal, rounded to the nearest pico-dollar.
    /// Refused: a NaN or infinite value, a negative one, one too large.
    /// For front ends that carry a stored `cost_usd` as an `f64` (the HTML
    /// report) and print it by the same rule as [`dollars`].
    pub fn from_f64(v: f64) -> Result<Usd, DecimalError> {
        if !v.is_finite() {
            return Err(DecimalError::NotANumber);
        }
        if v < 0.0 {
            return Err(DecimalError::Negative);
        }
        // Display of an f64 never uses an exponent; `abs` turns -0.0 into 0.
        parse_decimal(
            &format!("{}", v.abs()),
            USD_DECIMALS,
            Rounding::NearestHalfUp,
        )
        .map(Usd)
    }

    /// The nearest `f64`, for JSON output. Exact for every amount with at
    /// most 15 significant digits (the decimal is parsed by Rust's
    /// correctly rounding parser, and serde_json prints the shortest
    /// decimal that reads back as the same `f64`).
    pub fn to_f64(self) -> f64 {
        // Parsing a plain decimal string produced by `Display` cannot
        // fail; 0.0 is unreachable and only keeps this function total.
        self.to_string().parse::<f64>().unwrap_or(0.0)
    }

    /// The amount with exactly `decimals` decimal places (at most 12),
    /// rounded down or up, prefixed with `$`. Reports round a low end down
    /// and a high end up, so a printed range still contains the exact one.
    pub fn to_dollars(self, decimals: u32, round: Round) -> String {
        let decimals = decimals.min(USD_DECIMALS);
        let step = 10u128.pow(USD_DECIMALS - decimals);
        let units = match round {
            Round::Down => self.0 / step,
            Round::Up => self.0 / step + u128::from(!self.0.is_multiple_of(step)),
        };
        let scale = 10u128.pow(decimals);
        let (whole, frac) = (units / scale, units % scale);
        if decimals == 0 {
            format!("${whole}")
        } else {
            format!("${whole}.{frac:0width$}", width = decimals as usize)
        }
    }
}

/// `$0.001234`: how every output prints a cost. Six decimals, rounded up
/// so that a printed cost or need is never less than the exact one; an
/// amount under a micro-dollar, which six decimals would show as
/// `$0.000001`, prints exactly (`$0.00000042`).
///
/// One function for every front end (the console, `runs show`, the HTML
/// report): a cost printed two ways, one rounded to nearest, would let
/// the same call read $0.000017 in one place and $0.000018 in another.
pub fn dollars(amount: Usd) -> String {
    if amount != Usd::ZERO && amount < Usd::from_picos(1_000_000) {
        format!("${amount}")
    } else {
        amount.to_dollars(6, Round::Up)
    }
}

/// Which way [`Usd::to_dollars`] rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// Toward zero: for low ends.
    Down,
    /// Away from zero: for high ends.
    Up,
}

/// The exact decimal, without trailing zeros: `0.0125`, `3`.
impl fmt::Display for Usd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_decimal(f, self.0, USD_DECIMALS)
    }
}

impl Serialize for Usd {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.to_f64())
    }
}

/// Reads a dollar amount as [`Usd`]'s `Serialize` writes it: a JSON or
/// YAML number (`0.000366`). The number's shortest decimal form is parsed,
/// so every amount written with at most 15 significant digits reads back
/// exactly; digits past the twelfth decimal (binary noise of a longer
/// amount) round to the nearest pico-dollar. A decimal string (`"0.25"`)
/// is read exactly. Negative amounts are refused.
impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Usd, D::Error> {
        deserializer.deserialize_any(UsdVisitor)
    }
}

struct UsdVisitor;

impl serde::de::Visitor<'_> for UsdVisitor {
    type Value = Usd;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an amount of US dollars (a number such as 0.25)")
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Usd, E> {
        Ok(Usd(u128::from(v).saturating_mul(PICOS_PER_DOLLAR)))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Usd, E> {
        if v < 0 {
            return Err(E::custom(DecimalError::Negative));
        }
        self.visit_u64(v.unsigned_abs())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Usd, E> {
        Usd::from_f64(v).map_err(E::custom)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Usd, E> {
        Usd::parse(v).map_err(E::custom)
    }
}

impl JsonSchema for Usd {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Usd".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "number",
            "minimum": 0,
            "description": "An amount of US dollars (exact to the pico-dollar up to 15 significant digits)."
        })
    }
}

impl std::iter::Sum for Usd {
    fn sum<I: Iterator<Item = Usd>>(iter: I) -> Usd {
        iter.fold(Usd::ZERO, Usd::saturating_add)
    }
}

/// An exact signed amount of US dollars, in pico-dollars: what the
/// provider's prompt cache saved on a task or a run — what its cache reads
/// and writes would have cost at the input price, less what they cost.
/// Negative when cache writes (Anthropic bills them at 1.25× the input
/// price) cost more than the reads saved, which is why it is not a
/// [`Usd`]: an amount spent is never negative, a saving can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Saving(i128);

impl Saving {
    /// Nothing saved.
    pub const ZERO: Saving = Saving(0);

    /// `without - with`: what a call would have cost without the cache,
    /// less what it cost (saturating at the largest amounts).
    pub fn between(without: Usd, with: Usd) -> Saving {
        let signed = |u: Usd| i128::try_from(u.0).unwrap_or(i128::MAX);
        Saving(signed(without).saturating_sub(signed(with)))
    }

    /// `self + other`, saturating.
    #[must_use]
    pub const fn saturating_add(self, other: Saving) -> Saving {
        Saving(self.0.saturating_add(other.0))
    }

    /// Whether the cache cost more than it saved.
    pub const fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// The amount without its sign.
    pub const fn magnitude(self) -> Usd {
        Usd(self.0.unsigned_abs())
    }

    /// `$0.000123`, or `-$0.000123` when the cache cost more: six
    /// decimals, the magnitude rounded up as every printed cost is.
    pub fn to_dollars(self, decimals: u32) -> String {
        let sign = if self.is_negative() { "-" } else { "" };
        format!("{sign}{}", self.magnitude().to_dollars(decimals, Round::Up))
    }
}

/// The exact signed decimal: `0.0125`, `-0.00075`.
impl fmt::Display for Saving {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_negative() {
            f.write_str("-")?;
        }
        write_decimal(f, self.0.unsigned_abs(), USD_DECIMALS)
    }
}

/// A JSON number, as [`Usd`] writes one (negative when the cache cost
/// more).
impl Serialize for Saving {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let magnitude = self.magnitude().to_f64();
        serializer.serialize_f64(if self.is_negative() {
            -magnitude
        } else {
            magnitude
        })
    }
}

/// Reads what [`Saving`]'s `Serialize` writes: a number, its magnitude read
/// as [`Usd`] reads one.
impl<'de> Deserialize<'de> for Saving {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Saving, D::Error> {
        let value = f64::deserialize(deserializer)?;
        let magnitude = serde::de::Visitor::visit_f64::<D::Error>(UsdVisitor, value.abs())?;
        let signed = i128::try_from(magnitude.0).unwrap_or(i128::MAX);
        Ok(Saving(if value < 0.0 { -signed } else { signed }))
    }
}

impl JsonSchema for Saving {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Saving".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "number",
            "description": "A signed amount of US dollars: what the prompt cache saved (negative when it cost more)."
        })
    }
}

/// A price in US dollars per million tokens, held exactly in micro-dollars
/// per million tokens (which is the same number as pico-dollars per token).
///
/// In a plan or a `--price` flag it is written as dollars per million
/// tokens with at most six decimal places: `2.5`, `0.075`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(u64);

impl Rate {
    /// Free.
    pub const ZERO: Rate = Rate(0);

    /// A rate from micro-dollars per million tokens (`2_500_000` is $2.50
    /// per million).
    pub const fn from_micros_per_million(micros: u64) -> Rate {
        Rate(micros)
    }

    /// The rate in micro-dollars per million tokens.
    pub const fn micros_per_million(self) -> u64 {
        self.0
    }

    /// Parses dollars per million tokens written as a decimal (`2.5`) or
    /// with an exponent (`2.5e-1`), exactly: at most six decimal places
    /// once the exponent has moved the point, no sign.
    pub fn parse(text: &str) -> Result<Rate, DecimalError> {
        let micros = parse_decimal(text, RATE_DECIMALS, Rounding::Exact)?;
        u64::try_from(micros)
            .map(Rate)
            .map_err(|_| DecimalError::TooLarge)
    }

    /// A rate from a per-token price in dollars as LiteLLM writes it
    /// (`2.5e-06`), rounded to the nearest micro-dollar per million tokens
    /// (half up). The `f64` is first turned into the shortest decimal that
    /// reads back as the same `f64` — the literal the file most likely
    /// holds — so no binary error enters the conversion.
    pub fn from_dollars_per_token(per_token: f64) -> Result<Rate, DecimalError> {
        if !per_token.is_finite() {
            return Err(DecimalError::NotANumber);
        }
        if per_token < 0.0 {
            return Err(DecimalError::Negative);
        }
        // Display of an f64 never uses an exponent, so the parser below
        // sees plain digits. -0.0 was let through above and prints "-0".
        let text = format!("{}", per_token.abs());
        let picos_per_token = parse_decimal(&text, USD_DECIMALS, Rounding::NearestHalfUp)?;
        u64::try_from(picos_per_token)
            .map(Rate)
            .map_err(|_| DecimalError::TooLarge)
    }

    /// A rate from dollars per million tokens given as an `f64`, as a YAML
    /// or JSON plan holds it. Exact: more than six decimal places is an
    /// error rather than a silent rounding.
    pub fn from_dollars_per_million(value: f64) -> Result<Rate, DecimalError> {
        if !value.is_finite() {
            return Err(DecimalError::NotANumber);
        }
        if value < 0.0 {
            return Err(DecimalError::Negative);
        }
        Rate::parse(&format!("{}", value.abs()))
    }

    /// The exact cost of `tokens` tokens at this rate. Never overflows:
    /// a `u64` times a `u64` fits a `u128`.
    pub const fn cost(self, tokens: u64) -> Usd {
        Usd(tokens as u128 * self.0 as u128)
    }

    /// The nearest `f64` of dollars per million tokens, for JSON output.
    pub fn to_f64(self) -> f64 {
        self.to_string().parse::<f64>().unwrap_or(0.0)
    }
}

/// Dollars per million tokens, exact, without trailing zeros: `2.5`.
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_decimal(f, u128::from(self.0), RATE_DECIMALS)
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.to_f64())
    }
}

/// Reads a number of dollars per million tokens. Integers and floats are
/// accepted; a negative number, a string, or more than six decimal places
/// is an error (serde adds the field path and, for JSON and YAML, the
/// line).
impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Rate, D::Error> {
        deserializer.deserialize_any(RateVisitor)
    }
}

struct RateVisitor;

impl serde::de::Visitor<'_> for RateVisitor {
    type Value = Rate;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a price in US dollars per million tokens (a number such as 2.5)")
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Rate, E> {
        Rate::parse(&v.to_string()).map_err(E::custom)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Rate, E> {
        if v < 0 {
            return Err(E::custom(DecimalError::Negative));
        }
        self.visit_u64(v.unsigned_abs())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Rate, E> {
        Rate::from_dollars_per_million(v).map_err(E::custom)
    }
}

impl JsonSchema for Rate {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "UsdPerMillionTokens".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "number",
            "minimum": 0,
            "description": "US dollars per million tokens, at most six decimal places."
        })
    }
}

/// Why a decimal number was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecimalError {
    /// Nothing was written.
    #[error("is empty")]
    Empty,
    /// A minus sign.
    #[error("is negative")]
    Negative,
    /// Not a decimal number (with or without an exponent).
    #[error("is not a number (write a decimal such as 2.5 or 1.5e-5)")]
    NotANumber,
    /// More decimal places than the unit holds exactly.
    #[error("has more than {max_decimals} decimal places")]
    TooPrecise {
        /// The most the unit holds.
        max_decimals: u32,
    },
    /// Larger than the unit holds.
    #[error("is too large")]
    TooLarge,
}

/// How [`parse_decimal`] treats digits beyond the unit.
#[derive(Clone, Copy)]
enum Rounding {
    /// Refuse them.
    Exact,
    /// Round to the nearest unit, half up.
    NearestHalfUp,
}

/// Parses `digits[.digits][e[+|-]digits]` into an integer count of
/// `10^-scale` units.
///
/// Why an exponent: ctx's own JSON prints an amount as serde_json prints
/// the nearest `f64`, which is `1.62e-5` below a ten-thousandth, and a
/// figure ctx prints must read back through every flag that takes one
/// (`plan cost --format json`'s high end as `--max-cost`). The exponent
/// only moves the decimal point in the written digits ([`shift_point`]),
/// so `1.62e-5` is exactly `0.0000162`: no `f64` is involved and the
/// rounding rule is the plain decimal's.
fn parse_decimal(text: &str, scale: u32, rounding: Rounding) -> Result<u128, DecimalError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DecimalError::Empty);
    }
    if text.starts_with('-') {
        return Err(DecimalError::Negative);
    }
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e)),
        None => (text, None),
    };
    let (whole, frac) = match mantissa.split_once('.') {
        Some((w, f)) => (w, f),
        None => (mantissa, ""),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !all_digits(whole) || !all_digits(frac) || mantissa.ends_with('.') {
        return Err(DecimalError::NotANumber);
    }
    let shifted;
    let (whole, frac) = match exponent {
        None => (whole, frac),
        Some(e) => {
            shifted = shift_point(whole, frac, e, scale)?;
            (shifted.0.as_str(), shifted.1.as_str())
        }
    };
    let mut units: u128 = 0;
    for b in whole.bytes() {
        units = units
            .checked_mul(10)
            .and_then(|u| u.checked_add(u128::from(b - b'0')))
            .ok_or(DecimalError::TooLarge)?;
    }
    let scale = scale as usize;
    let (kept, dropped) = frac.split_at(frac.len().min(scale));
    for i in 0..scale {
        let digit = kept.as_bytes().get(i).map_or(0, |b| b - b'0');
        units = units
            .checked_mul(10)
            .and_then(|u| u.checked_add(u128::from(digit)))
            .ok_or(DecimalError::TooLarge)?;
    }
    if dropped.bytes().any(|b| b != b'0') {
        match rounding {
            Rounding::Exact => {
                return Err(DecimalError::TooPrecise {
                    max_decimals: scale as u32,
                });
            }
            Rounding::NearestHalfUp => {
                if dropped.as_bytes()[0] >= b'5' {
                    units = units.checked_add(1).ok_or(DecimalError::TooLarge)?;
                }
            }
        }
    }
    Ok(units)
}

/// The digits `whole.frac × 10^exponent` as plain `(whole, frac)` digits.
/// The exponent is `[+|-]digits`. Its size is bounded before any digit is
/// moved: a `u128` holds 39 digits, so a point moved further right than
/// that past the first non-zero digit is [`DecimalError::TooLarge`], and
/// one moved further left than the unit's places plus one (the rounding
/// digit) leaves only digits a [`Rounding::Exact`] parse refuses and a
/// rounding one drops; `1e999999999` never builds a billion zeros.
fn shift_point(
    whole: &str,
    frac: &str,
    exponent: &str,
    scale: u32,
) -> Result<(String, String), DecimalError> {
    let digits_of = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (negative, magnitude) = match exponent.as_bytes().first() {
        Some(b'-') => (true, &exponent[1..]),
        Some(b'+') => (false, &exponent[1..]),
        _ => (false, exponent),
    };
    if !digits_of(magnitude) {
        return Err(DecimalError::NotANumber);
    }
    let digits = format!("{whole}{frac}");
    let Some(first) = digits.find(|c| c != '0') else {
        return Ok(("0".into(), String::new()));
    };
    // Where the point sits, counted in digits from the start of `digits`,
    // and how far the exponent may move it before the result is out of
    // range either way (both bounds are small, so `i64` holds every sum).
    let point = whole.len() as i64;
    let reach = digits.len() as i64 + i64::from(scale) + 40;
    let magnitude = magnitude.trim_start_matches('0');
    let shift = if magnitude.is_empty() {
        0
    } else if magnitude.len() > 18 {
        reach + 1
    } else {
        magnitude
            .parse::<i64>()
            .map_err(|_| DecimalError::NotANumber)?
    };
    let point = if negative {
        point - shift.min(reach + 1)
    } else {
        point + shift.min(reach + 1)
    };
    if point - first as i64 > 39 {
        return Err(DecimalError::TooLarge);
    }
    if point < first as i64 - i64::from(scale) - 1 {
        // Every non-zero digit lies past the unit's last place and the
        // rounding digit: what the plain decimal would have said.
        return Ok(("0".into(), format!("{}1", "0".repeat(scale as usize + 1))));
    }
    Ok(if point <= 0 {
        (
            "0".into(),
            format!("{}{digits}", "0".repeat(point.unsigned_abs() as usize)),
        )
    } else if point as usize >= digits.len() {
        (
            format!("{digits}{}", "0".repeat(point as usize - digits.len())),
            String::new(),
        )
    } else {
        let (w, f) = digits.split_at(point as usize);
        (w.to_string(), f.to_string())
    })
}

fn write_decimal(f: &mut fmt::Formatter<'_>, units: u128, scale: u32) -> fmt::Result {
    let one = 10u128.pow(scale);
    let (whole, frac) = (units / one, units % one);
    if frac == 0 {
        return write!(f, "{whole}");
    }
    let digits = format!("{frac:0width$}", width = scale as usize);
    write!(f, "{whole}.{}", digits.trim_end_matches('0'))
}

/// A plan's `config.prices`: model name to price.
///
/// ```yaml
/// config:
///   prices:
///     my-finetune:            # model name as the tasks write it
///       input: 3              # US dollars per million prompt tokens
///       output: 12            # ... per million completion tokens
///       cached_input: 1.5     # ... per million cached prompt tokens (optional)
///       cache_write: 3.75     # ... per million prompt tokens written to the cache (optional)
/// ```
///
/// Values are numbers of dollars per million tokens with at most six
/// decimal places (the unit ctx holds exactly); a negative value, a string
/// or a seventh decimal place is a parse error that names the field.
/// Without `cached_input`, cached tokens cost the input price (ctx-cost's
/// `plan_table` turns the map into a price table).
pub type PlanPrices = BTreeMap<String, PlanPrice>;

/// One model's price in a plan, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanPrice {
    /// US dollars per million prompt tokens.
    pub input: Rate,
    /// US dollars per million completion tokens.
    pub output: Rate,
    /// US dollars per million prompt tokens served from the provider's
    /// cache; the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<Rate>,
    /// US dollars per million prompt tokens written to the provider's
    /// cache (Anthropic bills a write above the input price); the input
    /// price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<Rate>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saving_is_signed_and_reads_back_as_written() {
        let usd = |s| Usd::parse(s).unwrap();
        let more = Saving::between(usd("0.001"), usd("0.00175"));
        assert_eq!(more.to_string(), "-0.00075");
        assert_eq!(more.to_dollars(6), "-$0.000750");
        let saved = Saving::between(usd("0.0125"), usd("0.0025"));
        assert_eq!(saved.to_dollars(6), "$0.010000");
        assert_eq!(more.saturating_add(saved).to_string(), "0.00925");
        for s in [more, saved, Saving::ZERO] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<Saving>(&json).unwrap(), s, "{json}");
        }
        assert_eq!(serde_json::to_string(&more).unwrap(), "-0.00075");
    }

    #[test]
    fn amounts_read_back_what_they_write() {
        for text in [
            "0",
            "0.000366",
            "12.5",
            "0.000000000001",
            "999.123456789012",
            "3",
        ] {
            let a = Usd::parse(text).unwrap();
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(serde_json::from_str::<Usd>(&json).unwrap(), a, "{json}");
        }
        assert_eq!(
            serde_json::from_str::<Usd>("\"0.25\"").unwrap(),
            Usd::parse("0.25").unwrap()
        );
        assert_eq!(
            serde_json::from_str::<Usd>("2").unwrap(),
            Usd::parse("2").unwrap()
        );
        assert!(serde_json::from_str::<Usd>("-0.5").is_err());
        assert!(serde_json::from_str::<Usd>("-1").is_err());
        assert_eq!(
            serde_json::from_str::<Usd>("\"1e3\"").unwrap(),
            Usd::parse("1000").unwrap()
        );
        assert!(serde_json::from_str::<Usd>("true").is_err());
    }

    /// What ctx prints must read back: serde_json writes an amount under
    /// a ten-thousandth with an exponent (`1.62e-5`), and a `plan cost`
    /// high end passed on as `--max-cost` is read digit for digit, never
    /// through an `f64` (which would hold 1.62e-5 as 1.6199999…e-5).
    #[test]
    fn exponent_forms_read_exactly() {
        let usd = |s| Usd::parse(s);
        assert_eq!(usd("1.62e-05"), Ok(Usd(16_200_000)));
        assert_eq!(usd("1.62e-5"), usd("0.0000162"));
        assert_eq!(usd("1.62E-5"), usd("0.0000162"));
        assert_eq!(usd("2.355e-5"), Ok(Usd(23_550_000)));
        assert_eq!(usd("1e-12"), Ok(Usd(1)));
        assert_eq!(usd("1e3"), Ok(Usd(1000 * PICOS_PER_DOLLAR)));
        assert_eq!(usd("1e+3"), usd("1000"));
        assert_eq!(usd("0.5e1"), usd("5"));
        assert_eq!(usd("125e-2"), usd("1.25"));
        assert_eq!(usd("12.5e0"), usd("12.5"));
        assert_eq!(usd("0e999999999999999999999"), Ok(Usd::ZERO));
        assert_eq!(usd("000.00e-3"), Ok(Usd::ZERO));
        assert_eq!(
            usd("1e-13"),
            Err(DecimalError::TooPrecise { max_decimals: 12 })
        );
        assert_eq!(
            usd("1e-999999999999999999999"),
            Err(DecimalError::TooPrecise { max_decimals: 12 })
        );
        assert_eq!(usd("1e27"), Err(DecimalError::TooLarge));
        assert_eq!(usd("1e999999999999999999999"), Err(DecimalError::TooLarge));
        assert_eq!(usd("-1.62e-5"), Err(DecimalError::Negative));
        assert_eq!(Rate::parse("2.5e-1"), Ok(Rate(250_000)));
        assert_eq!(Rate::parse("1e-6"), Ok(Rate(1)));
        // Every amount serde_json writes reads back as the same amount,
        // exponent or not.
        for picos in [
            1,
            7,
            16_200_000,
            23_550_000,
            99_999_999,
            123_456_789_012,
            10u128.pow(15),
        ] {
            let json = serde_json::to_string(&Usd(picos)).unwrap();
            assert_eq!(Usd::parse(&json), Ok(Usd(picos)), "{json}");
        }
        // A rounding reader (a stored `cost_usd`) rounds what lies past
        // the last place, as it does for the plain form.
        assert_eq!(parse_decimal("4e-13", 12, Rounding::NearestHalfUp), Ok(0));
        assert_eq!(parse_decimal("5e-13", 12, Rounding::NearestHalfUp), Ok(1));
        assert_eq!(parse_decimal("1e-40", 12, Rounding::NearestHalfUp), Ok(0));
    }

    #[test]
    fn rates_parse_exactly_and_print_back() {
        assert_eq!(Rate::parse("2.5"), Ok(Rate(2_500_000)));
        assert_eq!(Rate::parse("0.075"), Ok(Rate(75_000)));
        assert_eq!(Rate::parse("10"), Ok(Rate(10_000_000)));
        assert_eq!(Rate::parse("0.000001"), Ok(Rate(1)));
        assert_eq!(Rate(2_500_000).to_string(), "2.5");
        assert_eq!(Rate(1).to_string(), "0.000001");
        assert_eq!(Rate(10_000_000).to_string(), "10");
    }

    #[test]
    fn bad_decimals_are_refused_with_a_reason() {
        assert_eq!(Rate::parse(""), Err(DecimalError::Empty));
        assert_eq!(Rate::parse("-1"), Err(DecimalError::Negative));
        assert_eq!(Rate::parse("abc"), Err(DecimalError::NotANumber));
        assert_eq!(
            Rate::parse("1e-7"),
            Err(DecimalError::TooPrecise { max_decimals: 6 })
        );
        for bad in [
            "1e", "1e-", "1e+", "e5", "1.e5", ".5e1", "1e5e1", "1e+-5", "1e 5", "1E0.5",
        ] {
            assert_eq!(Rate::parse(bad), Err(DecimalError::NotANumber), "{bad}");
        }
        assert_eq!(Rate::parse("-1e-6"), Err(DecimalError::Negative));
        assert_eq!(Rate::parse("1."), Err(DecimalError::NotANumber));
        assert_eq!(Rate::parse(".5"), Err(DecimalError::NotANumber));
        assert_eq!(Rate::parse("1.2.3"), Err(DecimalError::NotANumber));
        assert_eq!(Rate::parse("+1"), Err(DecimalError::NotANumber));
        assert_eq!(
            Rate::parse("0.0000001"),
            Err(DecimalError::TooPrecise { max_decimals: 6 })
        );
        assert_eq!(Rate::parse("0.1000000"), Ok(Rate(100_000)));
        assert_eq!(
            Rate::parse("99999999999999999999"),
            Err(DecimalError::TooLarge)
        );
        assert_eq!(
            Rate::parse(&"9".repeat(60)),
            Err(DecimalError::TooLarge),
            "u128 overflow while reading digits"
        );
    }

    #[test]
    fn per_token_floats_become_exact_rates() {
        assert_eq!(Rate::from_dollars_per_token(2.5e-06), Ok(Rate(2_500_000)));
        assert_eq!(Rate::from_dollars_per_token(7.5e-08), Ok(Rate(75_000)));
        assert_eq!(Rate::from_dollars_per_token(5e-09), Ok(Rate(5_000)));
        // Binary noise in LiteLLM's table rounds to the intended figure.
        assert_eq!(
            Rate::from_dollars_per_token(2.9999900000000002e-06),
            Ok(Rate(2_999_990))
        );
        assert_eq!(Rate::from_dollars_per_token(5e-13), Ok(Rate(1)));
        assert_eq!(Rate::from_dollars_per_token(4e-13), Ok(Rate(0)));
        assert_eq!(Rate::from_dollars_per_token(-0.0), Ok(Rate(0)));
        assert_eq!(
            Rate::from_dollars_per_token(-1e-6),
            Err(DecimalError::Negative)
        );
        assert_eq!(
            Rate::from_dollars_per_token(f64::NAN),
            Err(DecimalError::NotANumber)
        );
        assert_eq!(
            Rate::from_dollars_per_token(1e300),
            Err(DecimalError::TooLarge)
        );
    }

    #[test]
    fn sums_are_exact_where_floats_drift() {
        // 0.1 + 0.2 dollars, ten thousand times, in three orders.
        let a = Usd::parse("0.1").unwrap();
        let b = Usd::parse("0.2").unwrap();
        let total: Usd = (0..10_000).flat_map(|_| [a, b]).sum();
        assert_eq!(total.to_string(), "3000");
        let mut float = 0.0f64;
        for _ in 0..10_000 {
            float += 0.1;
            float += 0.2;
        }
        assert_ne!(float, 3000.0, "the float sum drifts; ours does not");
    }

    #[test]
    fn tokens_times_rate_is_picos() {
        // 1,000 tokens at $2.50 per million = $0.0025.
        let cost = Rate(2_500_000).cost(1_000);
        assert_eq!(cost.to_string(), "0.0025");
        assert_eq!(cost.to_f64(), 0.0025);
        // The extremes do not overflow.
        let max = Rate(u64::MAX).cost(u64::MAX);
        assert_eq!(max.picos(), u128::from(u64::MAX) * u128::from(u64::MAX));
        assert_eq!(
            Usd(u128::MAX).saturating_add(Usd::ONE_DOLLAR),
            Usd(u128::MAX)
        );
        assert_eq!(Usd(u128::MAX).saturating_mul(3), Usd(u128::MAX));
    }

    #[test]
    fn rounded_dollars_keep_the_exact_figure_inside() {
        let x = Usd::parse("0.0000123").unwrap();
        assert_eq!(x.to_dollars(6, Round::Down), "$0.000012");
        assert_eq!(x.to_dollars(6, Round::Up), "$0.000013");
        assert_eq!(Usd::ONE_DOLLAR.to_dollars(2, Round::Up), "$1.00");
        assert_eq!(Usd::ONE_DOLLAR.to_dollars(0, Round::Up), "$1");
        assert_eq!(Usd::ZERO.to_dollars(6, Round::Up), "$0.000000");
    }

    #[test]
    fn a_cost_prints_at_six_decimals_rounded_up_and_a_tiny_one_exactly() {
        let d = |t: &str| dollars(Usd::parse(t).unwrap());
        assert_eq!(d("0.0000175"), "$0.000018");
        assert_eq!(d("0.000017"), "$0.000017");
        assert_eq!(d("0.000017000001"), "$0.000018");
        assert_eq!(d("12.5"), "$12.500000");
        assert_eq!(d("0"), "$0.000000");
        assert_eq!(d("0.000001"), "$0.000001");
        assert_eq!(d("0.00000042"), "$0.00000042");
        assert_eq!(d("0.000000999999"), "$0.000000999999");
    }

    #[test]
    fn an_f64_amount_reads_as_its_shortest_decimal() {
        assert_eq!(Usd::from_f64(0.0000175), Usd::parse("0.0000175"));
        assert_eq!(Usd::from_f64(0.1 + 0.2), Usd::parse("0.3"));
        assert_eq!(Usd::from_f64(-0.0), Ok(Usd::ZERO));
        assert_eq!(Usd::from_f64(-1.0), Err(DecimalError::Negative));
        assert_eq!(Usd::from_f64(f64::NAN), Err(DecimalError::NotANumber));
        assert_eq!(Usd::from_f64(f64::INFINITY), Err(DecimalError::NotANumber));
        assert_eq!(Usd::from_f64(1e300), Err(DecimalError::TooLarge));
        // The stored figure round-trips.
        let x = Usd::parse("0.000366").unwrap();
        assert_eq!(Usd::from_f64(x.to_f64()), Ok(x));
    }

    #[test]
    fn rates_deserialize_from_numbers_only() {
        let r: Rate = serde_json::from_str("2.5").unwrap();
        assert_eq!(r, Rate(2_500_000));
        let r: Rate = serde_json::from_str("3").unwrap();
        assert_eq!(r, Rate(3_000_000));
        let r: Rate = serde_json::from_str("0.15").unwrap();
        assert_eq!(r, Rate(150_000));
        for bad in ["-1", "-0.5", "\"2.5\"", "null", "0.0000001", "true"] {
            assert!(serde_json::from_str::<Rate>(bad).is_err(), "{bad}");
        }
        assert_eq!(serde_json::to_string(&Rate(150_000)).unwrap(), "0.15");
    }
}
